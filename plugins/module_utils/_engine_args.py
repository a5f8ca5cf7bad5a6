# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vLLM, in the target's own venv, judges the target's arguments before the baseline stops.

The proof runs the venv's Python on PROOF_SCRIPT with the unit's arguments: vLLM's own serve parser reads
them, its serve-argument checks run, and its engine configuration is built, speculative configuration
included (the draft's or the model's config, a method's package, a context longer than the model's). No
engine starts and no weights load. What vLLM refuses there it would refuse at start, after the baseline
stopped and the GPUs went dark.
"""

from __future__ import annotations

import glob
import grp
import hashlib
import json
import os
import pwd
import re
import subprocess
import tempfile
import time

# One line of JSON after this marker says what vLLM answered; anything else on stdout or stderr is vLLM's log.
MARKER = "LLMOPS-ENGINE-ARGS "
REFUSED_EXIT = 3

# Run by the venv's interpreter, not by Ansible's: it may only use what vLLM's venv holds. The import paths
# moved between vLLM releases; each release this collection supports has one of them.
PROOF_SCRIPT = r'''
import json, sys, time
started = time.monotonic()
marker = %(marker)r
def answer(**fields):
    sys.stdout.write("\n" + marker + json.dumps(fields, default=str) + "\n")
    sys.stdout.flush()
try:
    try:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    except ImportError:
        from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    from vllm.engine.arg_utils import AsyncEngineArgs
except Exception as exc:
    answer(stage="import", error_type=type(exc).__name__, error=str(exc))
    sys.exit(2)
stage = "parse"
try:
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    args = parser.parse_args(sys.argv[1:])
    stage = "validate"
    validate_parsed_serve_args(args)
    stage = "engine_config"
    config = AsyncEngineArgs.from_cli_args(args).create_engine_config()
except SystemExit as exc:
    answer(stage=stage, error_type="SystemExit", error="vLLM's argument parser exited with %%s" %% exc.code)
    sys.exit(%(refused)d)
except BaseException as exc:
    answer(stage=stage, error_type=type(exc).__name__, error=str(exc))
    sys.exit(%(refused)d)
speculative = getattr(config, "speculative_config", None)
answer(stage="done", seconds=round(time.monotonic() - started, 1),
       max_model_len=getattr(config.model_config, "max_model_len", None),
       speculative_method=getattr(speculative, "method", None),
       num_speculative_tokens=getattr(speculative, "num_speculative_tokens", None))
''' % {"marker": MARKER, "refused": REFUSED_EXIT}


class EngineArgsError(Exception):
    """The proof could not be run (not a refusal by vLLM)."""


def proof_argv(argv):
    """The interpreter and arguments of the proof, from the unit's argv (PYTHON -m SERVER_MODULE ARGS...)."""
    if len(argv) < 3 or argv[1] != "-m" or not argv[2].startswith("vllm."):
        raise EngineArgsError("argv must start with the venv's python, -m and vLLM's server module; got %s"
                              % json.dumps(list(argv[:3])))
    return [argv[0], "-c", PROOF_SCRIPT] + list(argv[3:])


def read_environment_file(path):
    """KEY=VALUE lines as systemd's EnvironmentFile= reads the ones this collection writes: a double-quoted value
    loses its quotes and the backslashes before escaped characters, a single-quoted one its quotes alone."""
    environment = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith(("#", ";")) or "=" not in line:
                continue
            key, value = line.split("=", 1)
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            elif len(value) >= 2 and value[0] == value[-1] == "'":
                value = value[1:-1]
            environment[key.strip()] = value
    return environment


def unit_environment(files, base):
    """The environment the unit's process gets: base, then each file in order (a leading - marks an optional one)."""
    environment = dict(base)
    for name in files:
        optional = name.startswith("-")
        path = name[1:] if optional else name
        if optional and not os.path.exists(path):
            continue
        environment.update(read_environment_file(path))
    return environment


def parse_answer(output):
    """vLLM's answer from the proof's output: the last marker line, or None."""
    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            try:
                return json.loads(line[len(MARKER):])
            except ValueError:
                return None
    return None


def log_tail(output, lines=12):
    """The last lines of vLLM's log, without the answer line: what an operator reads when vLLM refused."""
    kept = [line for line in output.splitlines() if line.strip() and not line.startswith(MARKER)]
    return kept[-lines:]


def as_user(name, group=None, supplementary_groups=()):
    """What the unit's User=, Group= and SupplementaryGroups= give its process, and the HOME that User= sets;
    the first is run between fork and exec (preexec_fn)."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise EngineArgsError("the user %s does not exist on the node" % name)
    try:
        gid = grp.getgrnam(group).gr_gid if group else entry.pw_gid
        extra = [grp.getgrnam(item).gr_gid for item in supplementary_groups]
    except KeyError as exc:
        raise EngineArgsError("a group of the unit does not exist on the node: %s" % exc)

    def drop():
        os.setgroups(extra)
        os.setgid(gid)
        os.setuid(entry.pw_uid)

    return drop, {"HOME": entry.pw_dir, "USER": name, "LOGNAME": name}


def run_proof(argv, environment, timeout, user=None, group=None, supplementary_groups=(), cwd=None,
              runner=subprocess.run):
    """Run the proof; return {accepted, answer, returncode, elapsed, log_tail}. Raises EngineArgsError."""
    command = proof_argv(argv)
    started = time.monotonic()
    environment = dict(environment)
    kwargs = dict(cwd=cwd or "/", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                  timeout=timeout)
    if user:
        # Run as the unit runs: files vLLM writes (its caches, a downloaded config) stay the service user's.
        kwargs["preexec_fn"], identity = as_user(user, group, supplementary_groups)
        environment = dict(identity, **environment)
    kwargs["env"] = environment
    try:
        completed = runner(command, check=False, **kwargs)
    except subprocess.TimeoutExpired:
        raise EngineArgsError("vLLM did not answer within %d s" % timeout)
    except OSError as exc:
        raise EngineArgsError("cannot run %s: %s" % (command[0], exc))
    output = completed.stdout.decode("utf-8", "replace") if isinstance(completed.stdout, bytes) else completed.stdout
    answer = parse_answer(output or "")
    elapsed = round(time.monotonic() - started, 1)
    result = dict(answer=answer, returncode=completed.returncode, elapsed=elapsed, log_tail=log_tail(output or ""))
    if completed.returncode == 0 and answer and answer.get("stage") == "done":
        result["accepted"] = True
        return result
    if completed.returncode == REFUSED_EXIT and answer:
        result["accepted"] = False
        return result
    what = ("%s: %s" % (answer.get("error_type"), answer.get("error"))) if answer else "no answer"
    raise EngineArgsError("the proof exited with %s (%s); vLLM's log ends: %s"
                          % (completed.returncode, what, " | ".join(result["log_tail"][-3:])))


def refusal_text(answer):
    """vLLM's refusal as one line: its exception type and message, at which stage."""
    stages = {"parse": "parsing the arguments", "validate": "checking the serve arguments",
              "engine_config": "building the engine configuration"}
    message = " ".join(str(answer.get("error") or "").split())
    return "%s while %s: %s" % (answer.get("error_type"), stages.get(answer.get("stage"), answer.get("stage")),
                                message)


# What vLLM reads from a local model or draft directory while it builds its configuration; the weights are not read.
CONFIG_FILES = ("config.json", "generation_config.json", "tokenizer_config.json", "params.json",
                "hf_quant_config.json", "quantize_config.json", "preprocessor_config.json")


def _flag_value(argv, flag):
    """The value of FLAG in argv (as FLAG VALUE or FLAG=VALUE), or None."""
    for index, word in enumerate(argv):
        if word == flag and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith(flag + "="):
            return word[len(flag) + 1:]
    return None


def _directory_fingerprint(path):
    """The configuration files of a local model directory, by content."""
    files = {}
    for name in CONFIG_FILES:
        candidate = os.path.join(path, name)
        if os.path.isfile(candidate):
            with open(candidate, "rb") as handle:
                files[name] = hashlib.sha256(handle.read()).hexdigest()
    return {"path": os.path.realpath(path), "files": files}


def _venv_fingerprint(python):
    """The venv of the unit's interpreter, by the distributions installed in it (their names carry the versions)."""
    venv = os.path.dirname(os.path.dirname(python))
    installed = sorted(os.path.basename(path) for path in glob.glob(
        os.path.join(venv, "lib", "python*", "site-packages", "*.dist-info")))
    return {"python": os.path.realpath(python), "distributions": installed}


def proof_key(argv, environment, user=None, group=None, supplementary_groups=(), cwd=None):
    """A digest of everything vLLM's answer depends on, or None when part of it is not on the node.

    That is the command line, the environment, who runs it and where, the venv's installed distributions, and the
    configuration files of the model, its tokenizer and the speculative draft. A model or draft that is not a local
    directory (a hub name) gives None: the hub's copy may change between two checks.
    """
    argv = [str(word) for word in argv]
    model = _flag_value(argv, "--model")
    if not model or not os.path.isdir(model):
        return None
    directories = [model]
    tokenizer = _flag_value(argv, "--tokenizer")
    if tokenizer:
        if not os.path.isdir(tokenizer):
            return None
        directories.append(tokenizer)
    speculative = _flag_value(argv, "--speculative-config")
    if speculative:
        try:
            draft = json.loads(speculative).get("model")
        except (ValueError, AttributeError):
            return None
        if draft is not None:
            if not isinstance(draft, str) or not os.path.isdir(draft):
                return None
            directories.append(draft)
    described = dict(argv=argv, environment=sorted(environment.items()), user=user, group=group,
                     supplementary_groups=list(supplementary_groups), cwd=cwd or "/",
                     venv=_venv_fingerprint(argv[0]), directories=[_directory_fingerprint(d) for d in directories])
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode("utf-8")).hexdigest()


def read_accepted(directory, key):
    """vLLM's earlier answer to the same proof (its stage, context length and speculative method), or None."""
    try:
        with open(os.path.join(directory, key + ".json"), encoding="utf-8") as handle:
            answer = json.load(handle)
    except (OSError, ValueError):
        return None
    return answer if isinstance(answer, dict) and answer.get("stage") == "done" else None


def write_accepted(directory, key, answer):
    """Keep an accepted answer under its key, readable by root alone, written whole or not at all."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    names = ("stage", "max_model_len", "speculative_method", "num_speculative_tokens")
    kept = dict((name, answer.get(name)) for name in names)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".accepted-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(kept, stream, sort_keys=True)
        os.chmod(temporary, 0o600)
        os.replace(temporary, os.path.join(directory, key + ".json"))
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
