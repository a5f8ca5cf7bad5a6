# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading a hand-made vLLM unit, and deciding whether the collection's baseline can take it over as it runs.

A unit is read as `systemctl cat` prints it (the unit file, then each drop-in, each after a `# <path>` line),
merged the way systemd merges it, and its ExecStart= is split by systemd's own rules for command lines
(systemd.service(5) "COMMAND LINES", systemd.syntax(7) "QUOTING"): words, quotes and C escapes, then `%`
specifiers, then `$VAR` / `${VAR}` from the unit's environment. `$$` and `%%` stand for one literal character.
"""

from __future__ import annotations

import glob
import json
import os
import re

EXEC_SETTINGS = ("ExecCondition", "ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop",
                 "ExecStopPost")
# Settings that accumulate over the unit and its drop-ins; an empty assignment clears what came before.
_LIST_SETTINGS = EXEC_SETTINGS + ("Environment", "EnvironmentFile")
_EXEC_PREFIXES = "@-:+!"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_ENVIRONMENT_NAME = re.compile(_NAME + r"\Z")
# One reference in an Exec word: $$ (a literal $), ${NAME} or $NAME (replaced by systemd), %% or %X (a specifier).
_REFERENCE = re.compile(r"\$\$|\$\{(" + _NAME + r")\}|\$(" + _NAME + r")|%%|%(.)", re.DOTALL)
# systemd.unit(5) "SPECIFIERS" that a service unit can meet, with what they stand for.
_SPECIFIERS = {
    "a": "the architecture", "A": "the OS image version", "b": "the boot ID", "B": "the OS build ID",
    "C": "the cache directory root", "d": "the credentials directory", "D": "the shared data directory",
    "E": "the configuration directory root", "f": "the unescaped file name", "g": "the user group",
    "G": "the user GID", "h": "the user's home directory", "H": "the host name", "i": "the instance name",
    "I": "the unescaped instance name", "j": "the final component of the prefix", "J": "the unescaped final component",
    "l": "the short host name", "L": "the log directory root", "m": "the machine ID", "M": "the OS image ID",
    "n": "the full unit name", "N": "the unit name without its type suffix", "o": "the OS ID", "p": "the prefix name",
    "P": "the unescaped prefix name", "q": "the pretty host name", "s": "the user's shell", "S": "the state directory root",
    "t": "the runtime directory root", "T": "the temporary directory", "u": "the user name", "U": "the user UID",
    "v": "the kernel release", "V": "the directory for larger temporary files", "w": "the OS version ID",
    "W": "the OS variant ID", "y": "the unit's fragment path", "Y": "the fragment's directory",
}
_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"',
              "'": "'", "s": " "}
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# vLLM's one-letter-ish aliases, as its argument parser declares them.
_SHORT_FLAGS = {"-tp": "tensor_parallel_size", "-pp": "pipeline_parallel_size", "-dp": "data_parallel_size",
                "-q": "quantization"}
# What vLLM does when these flags are left out; any other flag left out is not assumed to equal a value.
VLLM_DEFAULTS = {"host": "0.0.0.0", "port": 8000}
# Environment names that hold credentials by convention: their values are compared, never shown.
SECRET_NAME = re.compile(r"(?:^|_)(?:TOKEN|KEY|APIKEY)$|PASSWORD|PASSWD|SECRET|CREDENTIAL", re.IGNORECASE)
# Flags that put a credential on the command line, with the environment variable that carries it instead.
_SECRET_FLAGS = {"api_key": "VLLM_API_KEY", "hf_token": "HF_TOKEN"}
_MODEL_SLUG = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")
# A unit name the collection writes as a file and passes to systemctl: plain characters, a service.
UNIT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*\.service\Z")
UNIT_NAME_MAX_LENGTH = 255


# systemd's spellings of a true boolean (systemd.syntax(7)).
_TRUE = ("1", "yes", "y", "true", "t", "on")


class AdoptionError(ValueError):
    """The unit cannot be read as a vLLM server that the collection could take over."""


def unit_name_problem(name, variable="vllm_baseline_unit_name"):
    """Why name cannot be the baseline's unit, or None."""
    if not isinstance(name, str) or not UNIT_NAME.match(name) or len(name) > UNIT_NAME_MAX_LENGTH:
        return ("%s: %r must be a service unit name of letters, digits and _.:- that ends in .service (no @ "
                "template, no path, at most %d characters), e.g. vllm-kimi-k25-int4.service"
                % (variable, name, UNIT_NAME_MAX_LENGTH))
    return None


class Entry:
    """One assignment in a unit file or drop-in, with where it stands."""

    def __init__(self, path, line, section, key, value):
        self.path, self.line, self.section, self.key, self.value = path, line, section, key, value

    def where(self):
        return "%s line %d" % (self.path, self.line)


def parse_systemctl_cat(text):
    """Return (paths, entries): the files `systemctl cat` showed, in order, and every assignment in them."""
    paths, entries = [], []
    path, section, pending, start, line_in_file = None, None, None, 0, 0
    for raw in text.splitlines():
        if path is None or (pending is None and raw.startswith("# /")):
            if raw.startswith("# /"):
                path, section, line_in_file = raw[2:].strip(), None, 0
                paths.append(path)
            continue
        line_in_file += 1
        stripped = raw.strip()
        if pending is None:
            if not stripped or stripped[0] in "#;":
                continue
            if stripped.startswith("[") and stripped.endswith("]"):
                section = stripped[1:-1]
                continue
            pending, start = stripped, line_in_file
        else:
            if stripped[:1] in ("#", ";"):
                continue
            pending += " " + stripped
        # A backslash at the end continues the line; systemd joins the parts with a space.
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        key, sep, value = pending.partition("=")
        if sep:
            entries.append(Entry(path, start, section, key.strip(), value.strip()))
        pending = None
    return paths, entries


def merge_settings(entries, section="Service"):
    """Setting -> its effective entries after the unit and its drop-ins: lists accumulate, others keep the last."""
    merged = {}
    for entry in entries:
        if entry.section != section:
            continue
        if entry.key in _LIST_SETTINGS:
            if entry.value == "":
                merged[entry.key] = []
            else:
                merged.setdefault(entry.key, []).append(entry)
        else:
            merged[entry.key] = [entry]
    return merged


def _read_word(text, index):
    """(word, next index) of the word starting at text[index], unquoted and C-unescaped as systemd does."""
    word, quote = [], None
    while index < len(text):
        char = text[index]
        if quote is None and char in " \t\n":
            break
        if char in "\"'" and quote is None:
            quote = char
        elif char == quote:
            quote = None
        elif char == "\\" and index + 1 < len(text):
            index += 1
            escape = text[index]
            if escape == "x" and re.match(r"[0-9a-fA-F]{2}", text[index + 1:index + 3]):
                word.append(chr(int(text[index + 1:index + 3], 16)))
                index += 2
            elif escape in _C_ESCAPES:
                word.append(_C_ESCAPES[escape])
            else:
                word.append(escape)
        else:
            word.append(char)
        index += 1
    if quote is not None:
        raise AdoptionError("unbalanced %s quote" % quote)
    return "".join(word), index


def split_exec(value):
    """(prefixes, words) of an Exec*= value: the special prefixes of its first word, then its words, unquoted."""
    text = value.strip()
    prefixes = ""
    while text[:1] and text[0] in _EXEC_PREFIXES:
        prefixes += text[0]
        text = text[1:]
    words, index = [], 0
    while index < len(text):
        if text[index] in " \t\n":
            index += 1
            continue
        word, index = _read_word(text, index)
        words.append(word)
    return prefixes, words


def expand_exec_words(words, environment, substitute=True):
    """The argv systemd spawns from unquoted words: %% and $$ become one character, $NAME and ${NAME} their value.

    A word that is exactly $NAME splits the value at whitespace; ${NAME} and $NAME inside a word insert the value
    whole. An unset name stands for nothing. Specifiers other than %% are left as written: their values belong to
    the node, and find_problems names them.
    """
    argv = []
    for word in words:
        whole = re.match(r"\$(" + _NAME + r")\Z", word)
        if substitute and whole:
            argv.extend(environment.get(whole.group(1), "").split())
            continue

        def replace(match):
            text = match.group(0)
            if text in ("$$", "%%"):
                return text[0]
            if text.startswith("%"):
                return text
            if not substitute:
                return text
            return environment.get(match.group(1) or match.group(2), "")
        argv.append(_REFERENCE.sub(replace, word))
    return argv


def parse_environment_assignments(value):
    """Name -> value of one Environment= line (space-separated NAME=VALUE words, quoted as Exec words are)."""
    assignments = {}
    dummy, words = split_exec(value)
    for word in words:
        name, sep, text = word.partition("=")
        if sep and _ENVIRONMENT_NAME.match(name):
            assignments[name] = text.replace("%%", "%")
    return assignments


def parse_environment_file(text):
    """Name -> value of an EnvironmentFile=, read as systemd reads it (shell-like quoting, no expansion)."""
    assignments = {}
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        index += 1
        if not line or line[0] in "#;":
            continue
        name, sep, rest = line.partition("=")
        name = name.strip()
        if not sep or not _ENVIRONMENT_NAME.match(name):
            continue
        rest = rest.lstrip()
        if rest[:1] in ("'", '"'):
            quote, value, position = rest[0], [], 1
            while True:
                if position >= len(rest):
                    if index >= len(lines):
                        break
                    value.append("\n")
                    rest, position = lines[index], 0
                    index += 1
                    continue
                char = rest[position]
                if char == quote:
                    break
                if quote == '"' and char == "\\" and position + 1 < len(rest):
                    position += 1
                    char = rest[position]
                    if char not in '"\\`$':
                        value.append("\\")
                value.append(char)
                position += 1
            assignments[name] = "".join(value)
        else:
            while rest.endswith("\\") and index < len(lines):
                rest = rest[:-1] + lines[index].strip()
                index += 1
            assignments[name] = re.sub(r"\\(.)", r"\1", rest.rstrip())
    return assignments


def unit_environment(settings, read_file):
    """(environment, files, problems): Environment= lines, overridden by EnvironmentFile= contents, as systemd does.

    read_file(path) returns the file's text or raises OSError. A file named with a leading - may be missing.
    """
    environment, files, problems = {}, [], []
    for entry in settings.get("Environment", []):
        environment.update(parse_environment_assignments(entry.value))
    for entry in settings.get("EnvironmentFile", []):
        path = entry.value
        optional = path.startswith("-")
        path = path.lstrip("-")
        try:
            environment.update(parse_environment_file(read_file(path)))
            files.append(path)
        except OSError as exc:
            if not optional:
                problems.append({"setting": "EnvironmentFile", "where": entry.where(), "severity": "error",
                                 "variable": None,
                                 "message": "EnvironmentFile=%s cannot be read (%s): systemd refuses to start the "
                                            "unit without it" % (path, exc.strerror or exc),
                                 "fix": "create %s or write EnvironmentFile=-%s" % (path, path)})
    return environment, files, problems


def find_problems(settings, environment):
    """What the unit means differently from what it says: `$` and `%` in Exec lines that systemd rewrites.

    A `$NAME` or `${NAME}` that the unit's environment does not set is replaced by nothing, and one that a shell
    script in the same line assigns (NAME=...) was meant for that shell: both are errors, fixed by `$$NAME`.
    A `%X` is replaced by a specifier's value: a warning, fixed by `%%X` where a literal `%` was meant.
    """
    problems = []
    for setting in EXEC_SETTINGS:
        for entry in settings.get(setting, []):
            try:
                prefixes, words = split_exec(entry.value)
            except AdoptionError as exc:
                problems.append({"setting": setting, "where": entry.where(), "severity": "error", "variable": None,
                                 "message": "%s= cannot be split into words: %s" % (setting, exc), "fix": None})
                continue
            text = " ".join(words)
            seen = set()
            for match in _REFERENCE.finditer(text):
                name = match.group(1) or match.group(2)
                specifier = match.group(3)
                if name and ":" not in prefixes and name not in seen:
                    seen.add(name)
                    assigned = re.search(r"(?:^|[\s;&|(])" + re.escape(name) + r"=", text)
                    if name in environment and not assigned:
                        continue
                    why = ("the shell script in this line assigns %s itself" % name if assigned
                           else "%s is not in the unit's environment" % name)
                    written = match.group(0)
                    problems.append({
                        "setting": setting, "where": entry.where(), "severity": "error", "variable": name,
                        "message": "%s= at %s: systemd replaces %s with %s before the command runs (%s), so the "
                                   "command never sees it" % (setting, entry.where(), written,
                                                              repr(environment.get(name, "")) if name in environment
                                                              else "an empty string", why),
                        "fix": "write $%s (systemd turns $$ into one literal $)" % written})
                elif specifier is not None and specifier not in seen:
                    seen.add(specifier)
                    meaning = _SPECIFIERS.get(specifier)
                    if meaning:
                        message = "%s= at %s: systemd replaces %%%s with %s" % (
                            setting, entry.where(), specifier, meaning)
                    else:
                        message = "%s= at %s: %%%s is no specifier, and systemd refuses the line" % (
                            setting, entry.where(), specifier)
                    problems.append({
                        "setting": setting, "where": entry.where(), "variable": None,
                        "severity": "warning" if meaning else "error", "message": message,
                        "fix": "write %%%%%s where a literal %%%s is meant" % (specifier, specifier)})
    return problems


def _typed(text):
    """A flag's value as the inventory would hold it: integers and plain decimals as numbers, JSON as data."""
    if re.match(r"-?[0-9]+\Z", text) and str(int(text)) == text:
        return int(text)
    if re.match(r"-?[0-9]+\.[0-9]+\Z", text) and str(float(text)) == text:
        return float(text)
    if text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _is_flag(word):
    return word.startswith("-") and not re.match(r"-[0-9.]", word) and word != "-"


def server_command(argv):
    """(venv, model, flags) of a vLLM server's argv: `<venv>/bin/vllm serve MODEL ...` or the module form.

    flags maps snake_case names to values: a flag alone is true, one value is kept typed, several make a list.
    Raise AdoptionError for any other program.
    """
    if not argv:
        raise AdoptionError("ExecStart= is empty")
    program = argv[0]
    base = os.path.basename(program)
    if base == "vllm" and argv[1:2] == ["serve"]:
        rest = argv[2:]
        model = None
        if rest and not _is_flag(rest[0]):
            model, rest = rest[0], rest[1:]
    elif re.match(r"python[0-9.]*\Z", base) and argv[1:3] == ["-m", SERVER_MODULE]:
        model, rest = None, argv[3:]
    else:
        raise AdoptionError("ExecStart= runs %s, which is not a vLLM server: the collection adopts `<venv>/bin/vllm "
                            "serve MODEL ...` or `<venv>/bin/python -m %s --model MODEL ...`"
                            % (" ".join(argv[:3]), SERVER_MODULE))
    if not program.startswith("/") or os.path.basename(os.path.dirname(program)) != "bin":
        raise AdoptionError("ExecStart= runs %s: the collection needs the absolute path of a venv's bin/ program "
                            "(vllm_venv is the directory above bin/)" % program)
    flags, index = {}, 0
    while index < len(rest):
        word = rest[index]
        index += 1
        if not _is_flag(word):
            raise AdoptionError("ExecStart= has %r where a flag was expected; a vLLM server takes one model and "
                                "--flags" % word)
        name, sep, inline = word.partition("=")
        key = _SHORT_FLAGS.get(name) or name.lstrip("-").replace("-", "_")
        if sep:
            values = [inline]
        else:
            values = []
            while index < len(rest) and not _is_flag(rest[index]):
                values.append(rest[index])
                index += 1
        if not values:
            flags[key] = True
        elif len(values) == 1:
            flags[key] = _typed(values[0])
        else:
            flags[key] = [_typed(value) for value in values]
    if "model" in flags:
        model = flags.pop("model")
    if model is None:
        raise AdoptionError("ExecStart= names no model (neither `vllm serve MODEL` nor --model)")
    return os.path.dirname(os.path.dirname(program)), str(model), flags


def server_settings(argv):
    """The server a vLLM argv runs, in the collection's terms: venv, model, served name, host, port, serve args.

    A flag left out takes vLLM's default where VLLM_DEFAULTS names it (port 8000, every interface), and the
    served name defaults to the model as vLLM's does. A flag that carries a credential is named in
    secret_flags and left out of serve_args, so that its value is never shown.
    """
    venv, model, flags = server_command(argv)
    served = flags.pop("served_model_name", model)
    if isinstance(served, list):
        served = served[0] if len(served) == 1 else served
    secret_flags = sorted(key for key in flags if key in _SECRET_FLAGS)
    for key in secret_flags:
        flags.pop(key)
    return {
        "venv": venv,
        "model": model,
        "served_name": served if isinstance(served, list) else str(served),
        "host": str(flags.pop("host", VLLM_DEFAULTS["host"])),
        "port": flags.pop("port", VLLM_DEFAULTS["port"]),
        "speculative_config": flags.pop("speculative_config", None),
        "serve_args": flags,
        "secret_flags": secret_flags,
    }


def read_unit(cat_text, read_file):
    """Everything the adoption needs from `systemctl cat` output: the server, environment, drop-ins and problems."""
    paths, entries = parse_systemctl_cat(cat_text)
    if not paths:
        raise AdoptionError("systemctl cat printed no unit file")
    settings = merge_settings(entries)
    environment, environment_files, problems = unit_environment(settings, read_file)
    problems = find_problems(settings, environment) + problems
    starts = settings.get("ExecStart", [])
    if len(starts) != 1:
        raise AdoptionError("the unit has %d ExecStart= commands after its drop-ins (%s); a vLLM server unit has "
                            "exactly one" % (len(starts), ", ".join(entry.where() for entry in starts) or "none"))
    start = starts[0]
    try:
        prefixes, words = split_exec(start.value)
    except AdoptionError as exc:
        raise AdoptionError("ExecStart= at %s cannot be split into words: %s" % (start.where(), exc)) from None
    argv = expand_exec_words(words, environment, substitute=":" not in prefixes)
    if any(re.search(r"%[^%]", word) for word in words):
        raise AdoptionError("ExecStart= at %s uses %% specifiers, whose values only the node knows; write the "
                            "values out (or %%%% for a literal %%) before adopting" % start.where())
    server = server_settings(argv)
    last = settings.get
    return {
        "fragment_path": paths[0],
        "drop_ins": paths[1:],
        "exec_start": start.value,
        "exec_start_at": start.where(),
        "argv": argv,
        "exec_start_pre": [entry.value for entry in last("ExecStartPre", [])],
        "environment": environment,
        "environment_files": environment_files,
        "user": last("User")[-1].value if last("User") else None,
        "group": last("Group")[-1].value if last("Group") else None,
        "dynamic_user": bool(last("DynamicUser")) and last("DynamicUser")[-1].value.lower() in _TRUE,
        "server": server,
        "problems": problems,
    }


def model_slug(unit_name, model):
    """A vllm_model.name for the adopted unit: its name without vllm- and .service, else the model's last part."""
    for candidate in (re.sub(r"^vllm-|\.service$", "", unit_name), os.path.basename(model.rstrip("/"))):
        slug = re.sub(r"[^a-z0-9._-]+", "-", candidate.lower()).strip("-._")[:64]
        if slug and _MODEL_SLUG.match(slug):
            return slug
    return "model"


def inventory_spec(unit_name, unit, version=None):
    """The collection's variables that describe the running unit as its baseline: ready to paste as YAML.

    Secret values never appear: a secret environment variable or credential flag becomes a vault reference.
    """
    server = unit["server"]
    environment = dict((name, value) for name, value in unit["environment"].items() if not SECRET_NAME.search(name))
    secrets = sorted(set(name for name in unit["environment"] if SECRET_NAME.search(name))
                     | set(_SECRET_FLAGS[flag] for flag in server["secret_flags"]))
    spec = {
        "vllm_baseline_unit_name": unit_name,
        "vllm_model": {"name": model_slug(unit_name, server["model"]), "path": server["model"],
                       "served_name": server["served_name"]},
        "vllm_host": server["host"],
        "vllm_port": server["port"],
        "vllm_venv": server["venv"],
        "vllm_serve_args": server["serve_args"],
        "vllm_environment": environment,
    }
    if version:
        spec["vllm_version"] = version
    if unit["user"]:
        spec["vllm_user"] = unit["user"]
    if unit["group"]:
        spec["vllm_group"] = unit["group"]
    if secrets:
        spec["vllm_secret_environment"] = dict((name, "{{ vault_%s }}" % name.lower()) for name in secrets)
    if server["speculative_config"] is not None:
        spec["vllm_variants"] = {"baseline": {"speculative_config": server["speculative_config"]}}
    return spec


def root_refusal(unit_name, unit):
    """Why a unit that runs as root is not adopted, or None when it runs as an account of its own.

    The rule: a unit runs as root when its User= (after its drop-ins) is root or 0, or when it sets no User= and
    no DynamicUser=yes, for systemd then starts it as root. Such a unit is refused, restart asked or not. The
    collection runs vLLM as a non-root vllm_user and never changes an existing account: it cannot take the unit over
    as it runs, and a restart would move a server that has read and written as root (the model, HOME and its
    caches) to another account, and find out whether that account can read the model only after a full load.
    """
    user = unit.get("user") or ""
    if user in ("root", "0"):
        why = "User=%s" % user
    elif not user and not unit.get("dynamic_user"):
        why = "it sets no User=, so systemd starts it as root"
    else:
        return None
    return ("vllm_user: %s runs as root (%s). The collection runs vLLM only as a non-root vllm_user and never changes "
            "an existing account, so it neither takes this unit over nor restarts it as another account. Give the "
            "unit a non-root User= that can read the model, restart it, and adopt it then" % (unit_name, why))


def _same(left, right):
    """Equal as the server reads them: argv words are text, so 8 and "8" (or 0.92 and "0.92") are one value."""
    if isinstance(left, dict) and isinstance(right, dict):
        return sorted(left) == sorted(right) and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right))
    if isinstance(left, (bool, dict, list, tuple)) or isinstance(right, (bool, dict, list, tuple)):
        return left == right
    return str(left) == str(right)


def _shown(name, value):
    return "(secret)" if SECRET_NAME.search(name) else value


def compare(unit, expected_argv, expected_environment, expected_user=None, expected_group=None):
    """(equivalent, differences): whether the running unit and the collection's baseline run the same server.

    Equivalent means, precisely:
    - the same server: the same venv, model, served name, host and port, the same serve args and speculative
      config, compared as vLLM parses them (flag order, --flag=value or --flag value, `vllm serve MODEL` or
      `python -m vllm.entrypoints.openai.api_server --model MODEL`, 8 or "8" do not matter; a left-out host,
      port or served name is vLLM's default; any other left-out flag differs from one given);
    - the same environment, name for name and value for value, from Environment= and EnvironmentFile= contents
      (secrets included: their values are compared and never shown);
    - the same account (User=, Group=), which sets HOME, where vLLM, torch and Hugging Face keep their caches.
    Everything else in the unit (ExecStartPre=, sandboxing, restart policy, timeouts) is not part of it: it only
    acts at the next start, and the collection's unit is the one that will start.
    """
    differences = []
    running = unit["server"]
    try:
        expected = server_settings(list(expected_argv))
    except AdoptionError as exc:
        return False, [{"setting": "argv", "running": unit["argv"], "collection": list(expected_argv),
                        "message": "the collection's own argv cannot be read: %s" % exc}]
    for key in ("venv", "model", "served_name", "host", "port", "speculative_config"):
        if not _same(running[key], expected[key]):
            differences.append({"setting": key, "running": running[key], "collection": expected[key],
                                "message": "%s: the running unit has %r, the collection's %r"
                                           % (key, running[key], expected[key])})
    if running["secret_flags"]:
        differences.append({"setting": "secret_flags", "running": running["secret_flags"], "collection": [],
                            "message": "the running unit passes %s on its command line; the collection passes "
                                       "credentials in a 0600 environment file"
                                       % ", ".join("--" + flag.replace("_", "-") for flag in running["secret_flags"])})
    ours, theirs = running["serve_args"], expected["serve_args"]
    for key in sorted(set(ours) | set(theirs)):
        if key not in theirs or key not in ours or not _same(ours[key], theirs[key]):
            differences.append({"setting": "serve_args.%s" % key, "running": ours.get(key),
                                "collection": theirs.get(key),
                                "message": "--%s: the running unit has %s, the collection's %s"
                                           % (key.replace("_", "-"),
                                              repr(ours[key]) if key in ours else "none",
                                              repr(theirs[key]) if key in theirs else "none")})
    env_running, env_expected = unit["environment"], dict(expected_environment)
    for name in sorted(set(env_running) | set(env_expected)):
        if env_running.get(name) != (None if env_expected.get(name) is None else str(env_expected[name])):
            differences.append({"setting": "environment.%s" % name,
                                "running": _shown(name, env_running.get(name)),
                                "collection": _shown(name, env_expected.get(name)),
                                "message": "environment %s: %s in the running unit, %s in the collection's"
                                           % (name, "unset" if name not in env_running
                                              else "set to %r" % _shown(name, env_running[name]),
                                              "unset" if name not in env_expected
                                              else "set to %r" % _shown(name, str(env_expected[name])))})
    for setting, theirs_value, ours_value in (("User", unit["user"], expected_user),
                                              ("Group", unit["group"], expected_group)):
        if ours_value is not None and (theirs_value or "root") != ours_value:
            differences.append({"setting": setting, "running": theirs_value or "root", "collection": ours_value,
                                "message": "%s=: the running unit runs as %s, the collection's as %s"
                                           % (setting, theirs_value or "root", ours_value)})
    return not differences, differences


def parse_process_environment(data):
    """Name -> value of a /proc/<pid>/environ reading (NUL-separated NAME=VALUE, bytes)."""
    environment = {}
    for item in data.split(b"\0"):
        name, sep, value = item.decode("utf-8", "surrogateescape").partition("=")
        if sep and _ENVIRONMENT_NAME.match(name):
            environment[name] = value
    return environment


def stale_environment(declared, process):
    """Differences where the running process holds another value than the unit's files now declare.

    The files may have been edited since the process started; what runs is what the process holds. Only the
    names the unit declares are compared: systemd adds others (PATH, HOME, INVOCATION_ID) to every service.
    """
    differences = []
    for name in sorted(declared):
        if process.get(name) != declared[name]:
            differences.append({"setting": "environment.%s" % name,
                                "running": _shown(name, process.get(name)), "collection": None,
                                "message": "environment %s: the running process holds %s, but the unit's files now "
                                           "say %r (edited since it started)"
                                           % (name, "no value" if name not in process
                                              else repr(_shown(name, process[name])), _shown(name, declared[name]))})
    return differences


def decide(unit_name, equivalent, differences, restart, already_adopted):
    """(action, reason): what the adoption does with a unit that it has read and compared.

    - already adopted (the unit file is the collection's) and equivalent: nothing to do.
    - equivalent: take_over, that is write the collection's unit at the unit's path and reload systemd, with no
      restart: the running process already is what the new unit would start.
    - not equivalent, with restart requested: restart, once, after writing the unit.
    - not equivalent otherwise: refuse, changing nothing, and say what differs and how to go on.
    """
    if already_adopted and equivalent:
        return "none", "%s is already the collection's baseline unit; nothing to do" % unit_name
    if equivalent:
        return "take_over", ("%s runs the same server as the collection's baseline (same argv, environment and "
                             "account): its file is replaced and systemd reloaded, without a restart" % unit_name)
    what = "; ".join(difference["message"] for difference in differences)
    if restart:
        return "restart", ("%s differs from the collection's baseline (%s): it is replaced and restarted once, as "
                           "vllm_adopt_restart asks" % (unit_name, what))
    return "refuse", ("%s differs from the collection's baseline (%s), so it was left untouched. Either make the "
                      "inventory say what the unit runs (the printed vllm_* lines) and run again, or restart it "
                      "into the collection's unit with -e vllm_adopt_restart=true (one restart, a full load of the "
                      "model)" % (unit_name, what))


def venv_release(venv):
    """(distribution, version) of the vLLM installed in venv, read from its metadata, or (None, None)."""
    for site in sorted(glob.glob(os.path.join(venv, "lib", "python*", "site-packages"))):
        for info in sorted(glob.glob(os.path.join(site, "vllm*.dist-info"))):
            match = re.match(r"(vllm(?:[-_]cpu)?)-([0-9][^-]*)\.dist-info\Z", os.path.basename(info))
            if match:
                return match.group(1).replace("_", "-"), match.group(2)
    return None, None
