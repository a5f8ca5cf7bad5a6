# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What systemd knows about a unit: its state, its journal, and which unit a process belongs to."""

from __future__ import annotations

import json
import re
import signal
import time

from ansible_collections.llmops.vllm.plugins.module_utils._start_phases import LOAD_PHASE_PATTERNS

SHOW_PROPERTIES = (
    "LoadState",
    "ActiveState",
    "SubState",
    "Result",
    "NRestarts",
    "MainPID",
    "ExecMainCode",
    "ExecMainStatus",
    "InactiveExitTimestampMonotonic",
    "ExecMainStartTimestampMonotonic",
    "ExecMainExitTimestampMonotonic",
    "InvocationID",
)

# si_code values systemd reports in ExecMainCode (see waitid(2)).
_EXIT_CODES = {1: "exited", 2: "killed", 3: "dumped"}

# vLLM's "(APIServer pid=42) " or "(EngineCore_DP0 pid=42) " in front of a process's lines.
_TAG = r"\([^)]*\) "
_PROCESS_TAG = re.compile("^" + _TAG)
_ERROR_LOG_PREFIX = r"(?:(?:ERROR|CRITICAL) [^\[]*\[[^\]]*\] )?"

# Signals that end a vLLM process by accident, and what each most often means on a serving node.
# Negative worker exit codes are Python's way of naming them (multiprocessing's -signum).
SIGNAL_CAUSES = {
    signal.SIGILL: ("illegal instruction",
                    "this CPU lacks an instruction that the engine's kernels use for the model's dtype: "
                    "set dtype: float32 in vllm_serve_args"),
    signal.SIGSEGV: ("segmentation fault", None),
    signal.SIGBUS: ("bus error", "often /dev/shm too small for the workers' shared memory"),
    signal.SIGKILL: ("killed", "most often the kernel's OOM killer: look for 'Out of memory' in 'journalctl -k'"),
    signal.SIGABRT: ("aborted", None),
    signal.SIGFPE: ("arithmetic error", None),
}
_SIGNAL_NAMES = "|".join(sig.name[3:] for sig in SIGNAL_CAUSES)

# Lines that name why a vLLM server died, most specific first: a CUDA OOM is also a Python
# exception, the engine's "initialization failed" only points back at the real cause, and a dead
# engine (EngineDeadError, a worker that "died unexpectedly" with a status) is the echo of whatever
# killed it, so it comes last.
FATAL_PATTERNS = (
    ("cuda_out_of_memory", re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory")),
    ("cpu_out_of_memory", re.compile(
        r"\bMemoryError\b|oom-kill|Out of memory: Killed process|killed by the OOM killer"
        r"|DefaultCPUAllocator: (?:can't allocate|not enough memory)|Cannot allocate memory")),
    # GPU workers, then vLLM's CPU worker: "Available memory on node 0 (11.9/17.96 GiB) on kv cache allocation is
    # less than requested memory for kv (100000.0 GiB)".
    ("kv_cache_too_small", re.compile(
        r"No available memory for the cache blocks|larger than the available KV cache memory"
        r"|less than requested memory for kv\b")),
    ("validation_error", re.compile(r"ValidationError")),
    # vLLM's executor: "Worker proc VllmWorker-0 died unexpectedly (exit code: -4), shutting down executor."
    ("worker_signal", re.compile(r"(?P<who>(?:Worker|Engine core) proc \S+) died unexpectedly"
                                 r" \(exit ?code:? (?P<code>-\d+)\)")),
    # systemd on the unit's main process: "Main process exited, code=killed, status=4/ILL".
    ("process_signal", re.compile(r"Main process exited, code=(?:killed|dumped), status=(?P<signal>\d+)/(?:%s)\b"
                                  % _SIGNAL_NAMES)),
    ("engine_init_failed", re.compile(r"Engine core initialization failed")),
    # The final line of a Python traceback, behind vLLM's optional "(EngineCore_DP0 pid=42) " tag and
    # its logger's "ERROR 11-29 14:03:02 [core.py:708] " when the traceback was logged.
    ("python_exception", re.compile(r"^(?:%s\s*)?%s(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)(?::|$)"
                                    % (_TAG, _ERROR_LOG_PREFIX))),
    ("engine_dead", re.compile(r"EngineDeadError|EngineCore encountered (?:a fatal error|an issue)"
                               r"|(?:Worker|Engine core) proc \S+ died unexpectedly")),
)

# Output that says nothing about the server's fate but can bury it: Triton's nanobind bindings print
# one line per leaked object when a worker exits, often more than a thousand of them.
NOISE_PATTERN = re.compile(r"^(?:%s)?(?:nanobind: |\s*- leaked (?:instance|type|function)\b"
                           r"|\s*- \.\.\. skipped remainder|See https://nanobind\.readthedocs\.io/)" % _TAG)

VALIDATION_DETAIL_LINES = 2
VALIDATION_DETAIL_CHARS = 240

PROC_ROOT = "/proc"

_UNIT_NAME = re.compile(r"^[^/]+\.(?:service|scope)$")


class UnitQueryError(Exception):
    """systemctl could not tell the unit's state."""


class JournalReadError(Exception):
    """journalctl could not give the unit's journal."""


class UnitState:
    """One `systemctl show` reading of a unit."""

    def __init__(self, properties):
        self.load_state = properties.get("LoadState", "")
        self.active_state = properties.get("ActiveState", "")
        self.sub_state = properties.get("SubState", "")
        self.result = properties.get("Result", "")
        self.n_restarts = _to_int(properties.get("NRestarts"))
        self.main_pid = _to_int(properties.get("MainPID")) or None
        self.exec_main_code = _to_int(properties.get("ExecMainCode"))
        self.exec_main_status = _to_int(properties.get("ExecMainStatus"))
        # New at every start of the unit: it tells one lifetime of a server from the next.
        self.invocation_id = properties.get("InvocationID") or None
        # systemd writes 0 for "never"; the values are in microseconds of CLOCK_MONOTONIC.
        left_inactive = _monotonic_seconds(properties.get("InactiveExitTimestampMonotonic"))
        self.main_started_monotonic = _monotonic_seconds(properties.get("ExecMainStartTimestampMonotonic"))
        self.main_exited_monotonic = _monotonic_seconds(properties.get("ExecMainExitTimestampMonotonic"))
        # A unit waiting to restart has left "inactive" again after its main process died, so the
        # run began at whichever came first: leaving "inactive" or starting the main process.
        starts = [value for value in (left_inactive, self.main_started_monotonic) if value is not None]
        self.started_monotonic = min(starts) if starts else None

    def describe(self):
        return "%s (%s)" % (self.active_state or "unknown", self.sub_state or "unknown")

    def exit_description(self):
        how = _EXIT_CODES.get(self.exec_main_code)
        if how is None or self.exec_main_status is None:
            return None
        if how == "exited":
            return "main process exited with status %d" % self.exec_main_status
        return "main process %s by signal %d" % (how, self.exec_main_status)

    def as_dict(self):
        return {
            "load_state": self.load_state,
            "active_state": self.active_state,
            "sub_state": self.sub_state,
            "result": self.result,
            "n_restarts": self.n_restarts,
            "main_pid": self.main_pid,
            "exec_main_status": self.exec_main_status,
            "invocation_id": self.invocation_id,
        }


def _to_int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _monotonic_seconds(microseconds):
    value = _to_int(microseconds)
    return value / 1e6 if value else None


def parse_show(text):
    """Turn `systemctl show` output (Key=Value lines) into a dict."""
    properties = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            properties[key.strip()] = value.strip()
    return properties


def unit_problem(state, restarts_baseline):
    """Say why the unit can no longer become ready, or return None while it still can."""
    if state.load_state != "loaded":
        return "is not loaded (%s)" % (state.load_state or "unknown")
    if state.active_state == "failed":
        detail = ", ".join(part for part in ("result %s" % state.result if state.result else None,
                                             state.exit_description()) if part)
        return "failed (%s)" % detail if detail else "failed"
    if state.sub_state.startswith("auto-restart"):
        return "is restarting after its main process ended (%s)" % (state.exit_description() or state.result)
    if state.n_restarts is not None and restarts_baseline is not None and state.n_restarts > restarts_baseline:
        return "restarted %d time(s) since the wait began" % (state.n_restarts - restarts_baseline)
    if state.active_state in ("inactive", "deactivating"):
        return "is %s" % state.describe()
    return None


class FatalCause:
    """Why a server died: the rule that matched, the journal line, and a sentence an operator can act on."""

    def __init__(self, name, line, summary=None, hint=None):
        self.name = name
        self.line = line
        self.summary = summary
        self.hint = hint

    def describe(self, when=None):
        """One sentence for messages: the interpretation, when it happened and what to do, then the line.

        A line that names its cause in words (an OOM, a validation error) is quoted as it is.
        """
        if not self.summary:
            return self.line
        text = self.summary + (" " + when if when else "")
        if self.hint:
            text += "; " + self.hint
        return "%s. Journal: %s" % (text, _PROCESS_TAG.sub("", self.line, count=1).strip())

    def as_dict(self):
        return {"name": self.name, "line": self.line, "summary": self.summary, "hint": self.hint}


def signal_summary(signum):
    """'SIGILL (illegal instruction)' and the usual meaning of that signal, or (None, None) when unknown."""
    try:
        sig = signal.Signals(signum)
    except ValueError:
        return None, None
    what, hint = SIGNAL_CAUSES.get(sig, ((signal.strsignal(sig) or "").lower(), None))
    return "%s (%s)" % (sig.name, what), hint


def _interpret(name, match, line):
    if name == "worker_signal":
        sig, hint = signal_summary(-int(match.group("code")))
        who = "engine worker" if match.group("who").startswith("Worker") else "engine core"
        return FatalCause(name, line, "%s killed by %s" % (who, sig), hint) if sig else None
    if name == "process_signal":
        sig, hint = signal_summary(int(match.group("signal")))
        return FatalCause(name, line, "server process killed by %s" % sig, hint) if sig else None
    return FatalCause(name, line)


def find_fatal_cause(lines):
    """Return the FatalCause that best names why the server died, or None.

    Patterns are tried most specific first; within one pattern the earliest line wins, since the
    first error is the cause and what follows is usually its echo. Noise lines are skipped, so a
    cause is found however much of it follows (the caller decides how much journal to read).
    """
    lines = without_noise(lines)[0]
    for name, pattern in FATAL_PATTERNS:
        for position, line in enumerate(lines):
            match = pattern.search(line)
            if not match:
                continue
            if name == "validation_error":
                return FatalCause(name, " | ".join([line] + _validation_details(lines[position + 1:])))
            cause = _interpret(name, match, line)
            if cause is not None:
                return cause
    return None


def engine_died(lines):
    """Whether the journal says the engine or one of its workers is gone (its API may still answer)."""
    dead = [pattern for name, pattern in FATAL_PATTERNS if name in ("worker_signal", "engine_dead")]
    return any(pattern.search(line) for line in lines for pattern in dead)


def without_noise(lines):
    """The lines that are not noise, and how many were dropped."""
    kept = [line for line in lines if not NOISE_PATTERN.search(line)]
    return kept, len(lines) - len(kept)


def _first_sentence(text, limit):
    if len(text) <= limit:
        return text
    end = text.find(". ")
    return text[:end + 1] if 0 < end < limit else text[:limit] + "..."


def _validation_details(following):
    """The indented lines under a pydantic ValidationError header, which name the field and rule."""
    details = []
    for line in following:
        text = _PROCESS_TAG.sub("", line, count=1)
        if not text[:1].isspace() or text.strip().startswith("For further information"):
            break
        details.append(_first_sentence(text.strip(), VALIDATION_DETAIL_CHARS))
        if len(details) == VALIDATION_DETAIL_LINES:
            break
    return details


def latest_phase_line(lines):
    """Return the newest line that tells the load phase, else the newest non-empty line."""
    fallback = None
    for line in reversed(lines):
        # Progress bars rewrite themselves with carriage returns; only the last state matters.
        line = line.rsplit("\r", 1)[-1].strip()
        if not line:
            continue
        if any(pattern.search(line) for pattern in LOAD_PHASE_PATTERNS):
            return line
        if fallback is None:
            fallback = line
    return fallback


def unit_from_cgroup(text):
    """Name the innermost systemd service or scope in the contents of /proc/PID/cgroup."""
    path = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy_id, controllers, cgroup_path = parts
        # cgroup v2 ("0::/...") or the v1 hierarchy systemd manages ("N:name=systemd:/...").
        if (hierarchy_id == "0" and controllers == "") or controllers == "name=systemd":
            path = cgroup_path
            if controllers == "":
                break
    if not path:
        return None
    for component in reversed(path.strip().split("/")):
        if _UNIT_NAME.match(component):
            return component
    return None


def unit_of_pid(pid):
    """Return the systemd unit a process runs in, or None (gone, unreadable, or not in a unit)."""
    try:
        with open("%s/%d/cgroup" % (PROC_ROOT, int(pid)), encoding="utf-8") as handle:
            return unit_from_cgroup(handle.read())
    except (OSError, ValueError):
        return None


def command_of_pid(pid, limit=200):
    """Return a process's command line as one line (cut to limit characters), or None when it has gone."""
    try:
        with open("%s/%d/cmdline" % (PROC_ROOT, int(pid)), "rb") as handle:
            raw = handle.read()
    except (OSError, ValueError):
        return None
    words = [word.decode("utf-8", "replace") for word in raw.split(b"\0") if word]
    if not words:
        return None
    command = " ".join(words)
    return command if len(command) <= limit else command[:limit - 3] + "..."


def monotonic_to_epoch(monotonic_seconds):
    """Place a CLOCK_MONOTONIC reading (as systemd reports them) on the wall clock."""
    return time.time() - (time.monotonic() - monotonic_seconds)


class SystemdUnit:
    """Read one unit's state and journal through systemctl and journalctl."""

    def __init__(self, name, run_command, systemctl, journalctl=None):
        self.name = name
        self._run_command = run_command
        self._systemctl = systemctl
        self._journalctl = journalctl

    def state(self):
        argv = [self._systemctl, "show", self.name, "--property=" + ",".join(SHOW_PROPERTIES)]
        rc, out, err = self._run_command(argv)
        if rc != 0:
            raise UnitQueryError("systemctl show %s failed (rc %d): %s" % (self.name, rc, (err or out).strip()))
        return UnitState(parse_show(out))

    def journal(self, lines, since_monotonic=None):
        """Return the unit's last journal lines, from its current run when the start is known."""
        if not self._journalctl:
            return []
        argv = [self._journalctl, "-u", self.name, "-n", str(lines), "-o", "cat", "--no-pager"]
        if since_monotonic:
            # A second of slack keeps the lines written just as the unit started.
            argv += ["--since", "@%d" % int(monotonic_to_epoch(since_monotonic) - 1)]
        rc, out, err = self._run_command(argv)
        if rc != 0:
            return ["(journalctl failed, rc %d: %s)" % (rc, (err or out).strip())]
        return [line for line in out.splitlines() if line.strip()]

    def journal_entries(self, since_monotonic, boot_id=None, lines=100000):
        """Return the unit's journal since since_monotonic as (monotonic seconds, message) pairs.

        The monotonic stamps are journald's, in the clock of systemd's *TimestampMonotonic properties;
        they only compare within one boot, so entries of another boot are dropped. Raises
        JournalReadError when the journal cannot be read.
        """
        if not self._journalctl:
            raise JournalReadError("journalctl is not in PATH on this host")
        argv = [self._journalctl, "-u", self.name, "-b", "-n", str(lines), "-o", "json",
                "--output-fields=MESSAGE,_BOOT_ID", "--no-pager",
                # A second of slack keeps the lines written just as the unit started.
                "--since", "@%d" % int(monotonic_to_epoch(since_monotonic) - 1)]
        rc, out, err = self._run_command(argv)
        if rc != 0:
            raise JournalReadError("journalctl -u %s failed (rc %d): %s" % (self.name, rc, (err or out).strip()))
        return parse_journal_json(out, boot_id)


def parse_journal_json(text, boot_id=None):
    """(monotonic seconds, message) pairs from `journalctl -o json` output, one entry a line.

    Lines that are not entries are skipped; with boot_id, so are entries of other boots. journald
    writes a message that is not valid UTF-8 as a list of byte values.
    """
    entries = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            monotonic = int(entry["__MONOTONIC_TIMESTAMP"]) / 1e6
        except (ValueError, TypeError, KeyError):
            continue
        if boot_id and entry.get("_BOOT_ID") and entry["_BOOT_ID"].replace("-", "") != boot_id.replace("-", ""):
            continue
        message = entry.get("MESSAGE")
        if isinstance(message, list):
            try:
                message = bytes(message).decode("utf-8", "replace")
            except (TypeError, ValueError):
                continue
        if isinstance(message, str):
            entries.append((monotonic, message))
    return entries
