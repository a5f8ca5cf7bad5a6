# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils import _systemd_unit
from ansible_collections.llmops.vllm.plugins.module_utils._systemd_unit import (
    JournalReadError,
    SystemdUnit,
    UnitQueryError,
    UnitState,
    engine_died,
    find_fatal_cause,
    latest_phase_line,
    parse_journal_json,
    parse_show,
    unit_from_cgroup,
    unit_of_pid,
    unit_problem,
    without_noise,
)

JOURNALS = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "journals"


def fatal_line(lines):
    """What the wait reports as fatal_line for these lines when it knows nothing of the request."""
    cause = find_fatal_cause(lines)
    return cause.describe() if cause else None


# `systemctl show vllm-tiny-ngram.service --property=...` of a unit whose server ran out of memory.
SHOW_FAILED = """LoadState=loaded
ActiveState=failed
SubState=failed
Result=exit-code
NRestarts=0
MainPID=0
ExecMainCode=1
ExecMainStatus=1
InactiveExitTimestampMonotonic=183920114522
InvocationID=5f0e7a2c9b1d4e6f8a3c2b1d0e9f8a7b
"""


def state(**properties):
    base = {"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "NRestarts": "0"}
    base.update((key, str(value)) for key, value in properties.items())
    return UnitState(base)


def test_parse_show_reads_key_value_lines():
    properties = parse_show(SHOW_FAILED + "ExecStart={ path=/opt/vllm/bin/python ; argv[]=python -m x=1 }\n")

    assert properties["ActiveState"] == "failed"
    assert properties["ExecStart"] == "{ path=/opt/vllm/bin/python ; argv[]=python -m x=1 }"


def test_unit_state_converts_what_systemd_prints():
    unit = UnitState(parse_show(SHOW_FAILED))

    assert unit.as_dict() == {"load_state": "loaded", "active_state": "failed", "sub_state": "failed",
                              "result": "exit-code", "n_restarts": 0, "main_pid": None, "exec_main_status": 1,
                              "invocation_id": "5f0e7a2c9b1d4e6f8a3c2b1d0e9f8a7b"}
    assert unit.started_monotonic == pytest.approx(183920.114522)
    assert unit.exit_description() == "main process exited with status 1"


def test_a_unit_never_started_has_no_invocation():
    assert UnitState(parse_show("LoadState=loaded\nActiveState=inactive\nInvocationID=\n")).invocation_id is None


def test_old_systemd_without_nrestarts_is_not_a_restart():
    unit = UnitState({"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "NRestarts": ""})

    assert unit.n_restarts is None
    assert unit_problem(unit, None) is None


@pytest.mark.parametrize("properties, baseline, problem", [
    ({}, 0, None),
    (dict(ActiveState="activating", SubState="start-pre"), 0, None),
    (dict(NRestarts=1), 0, "restarted 1 time(s) since the wait began"),
    (dict(NRestarts=4), 4, None),
    (dict(ActiveState="failed", SubState="failed", Result="oom-kill", ExecMainCode=2, ExecMainStatus=9), 0,
     "failed (result oom-kill, main process killed by signal 9)"),
    (dict(ActiveState="failed", SubState="failed"), 0, "failed"),
    (dict(ActiveState="activating", SubState="auto-restart-queued", Result="exit-code", ExecMainCode=1,
          ExecMainStatus=1), 0, "is restarting after its main process ended (main process exited with status 1)"),
    (dict(ActiveState="inactive", SubState="dead"), 0, "is inactive (dead)"),
    (dict(LoadState="not-found"), 0, "is not loaded (not-found)"),
    (dict(LoadState="masked"), 0, "is not loaded (masked)"),
])
def test_unit_problem(properties, baseline, problem):
    assert unit_problem(state(**properties), baseline) == problem


# vLLM start-up failures as they reach the journal (`journalctl -o cat`), abridged.
VALIDATION_JOURNAL = [
    "(APIServer pid=9120) INFO 11-29 13:50:01 [api_server.py:1885] vLLM API server version 0.32.0",
    "(APIServer pid=9120) Traceback (most recent call last):",
    '(APIServer pid=9120)   File "<frozen runpy>", line 198, in _run_module_as_main',
    "(APIServer pid=9120) pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
    "(APIServer pid=9120)   Value error, prompt_lookup_min=5 must be <= prompt_lookup_max=4 [type=value_error]",
]
# vLLM 0.32 on the mock host, for a context longer than the model's (abridged); a detail line that long
# is cut after its first sentence.
MODEL_CONFIG_JOURNAL = [
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
    "  Value error, User-specified max_model_len (65536) is greater than the derived max_model_len "
    "(max_position_embeddings=2048.0 or model_max_length=None in model's config.json). To allow overriding this "
    "maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
    "    For further information visit https://errors.pydantic.dev/2.14/v/value_error",
    "vllm-tiny-llama-crash_at_start.service: Main process exited, code=exited, status=1/FAILURE",
]
ENGINE_JOURNAL = [
    "(EngineCore_DP0 pid=9301) ERROR 11-29 13:52:40 [core.py:708] EngineCore failed to start.",
    "(EngineCore_DP0 pid=9301) ERROR 11-29 13:52:40 [core.py:708] ValueError: To serve at least one request with the "
    "models's max seq len (262144), (34.5 GiB KV cache is needed, which is larger than the available KV cache memory (12.1 GiB).",
    "(APIServer pid=9300) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
]
CPU_JOURNAL = [
    "INFO 11-29 13:55:02 [cpu_worker.py:112] Allocating KV cache",
    "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried to allocate 1073741824 bytes.",
]
# vLLM 0.32's CPU worker (the mock's crash_at_start variant), which names the KV cache that does not fit.
CPU_KV_JOURNAL = [
    "(EngineCore pid=13059) ERROR 12-03 05:59:34 [core.py:1510] ValueError: Available memory on node 0 "
    "(11.9/17.96 GiB) on kv cache allocation is less than requested memory for kv (100000.0 GiB). Decrease "
    "--kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes.",
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
]
GENERIC_JOURNAL = [
    "(APIServer pid=9400) Traceback (most recent call last):",
    "(APIServer pid=9400) OSError: [Errno 98] Address already in use",
    "vllm-tiny-ngram.service: Failed with result 'exit-code'.",
]
OOM_KILL_JOURNAL = [
    "INFO 11-29 13:58:11 [default_loader.py:267] Loading weights took 3.05 seconds",
    "vllm-tiny-ngram.service: A process of this unit has been killed by the OOM killer.",
    "vllm-tiny-ngram.service: Failed with result 'oom-kill'.",
]


@pytest.mark.parametrize("lines, expected", [
    (VALIDATION_JOURNAL,
     VALIDATION_JOURNAL[3] + " | Value error, prompt_lookup_min=5 must be <= prompt_lookup_max=4 [type=value_error]"),
    (MODEL_CONFIG_JOURNAL, "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig | "
                           "Value error, User-specified max_model_len (65536) is greater than the derived max_model_len "
                           "(max_position_embeddings=2048.0 or model_max_length=None in model's config.json)."),
    (ENGINE_JOURNAL, ENGINE_JOURNAL[1]),
    (CPU_JOURNAL, CPU_JOURNAL[1]),
    (GENERIC_JOURNAL, GENERIC_JOURNAL[1]),
    (OOM_KILL_JOURNAL, OOM_KILL_JOURNAL[1]),
    (["INFO all is well", "vllm-tiny-ngram.service: Deactivated successfully."], None),
    ([], None),
])
def test_the_fatal_line_names_the_root_cause(lines, expected):
    assert fatal_line(lines) == expected


def test_engine_init_failure_is_quoted_when_the_cause_is_not_in_view():
    assert fatal_line(ENGINE_JOURNAL[2:]) == ENGINE_JOURNAL[2]


def nanobind_noise(count):
    """What Triton's bindings print at a worker's exit, in the shape seen on the mock host."""
    lines = ["nanobind: leaked %d instances!" % (count - 2)]
    lines += [' - leaked instance 0x7fe56db5%04x of type "triton._C.libtriton.ir.attribute"' % i
              for i in range(count - 2)]
    return lines + ["nanobind: this is likely caused by a reference counting issue in the binding code."]


def read_journal(name):
    return (JOURNALS / name).read_text(encoding="utf-8").splitlines()


def test_a_worker_killed_by_sigill_is_named_behind_1500_lines_of_leak_noise():
    # Recorded on the mock host (vllm-cpu 0.32.0, bfloat16, a CPU with AMX): the worker died on the first
    # forward pass, the API answered 500 and shut down, then Triton printed its leaks (here 1,500 lines).
    lines = read_journal("worker_sigill_on_first_request.log")
    worker_line = next(line for line in lines if "died unexpectedly" in line)

    cause = find_fatal_cause(lines)

    assert len(without_noise(lines)[0]) == len(lines) - 1502
    assert cause.name == "worker_signal"
    assert cause.line == worker_line
    assert cause.describe("on its first request") == (
        "engine worker killed by SIGILL (illegal instruction) on its first request; this CPU lacks an instruction "
        "that the engine's kernels use for the model's dtype: set dtype: float32 in vllm_serve_args. Journal: "
        "ERROR 11-30 22:54:59 [multiproc_executor.py:315] Worker proc VllmWorker-0 died unexpectedly (exit code: -4), "
        "shutting down executor.")
    assert engine_died(lines)
    # What the wait used to read, the run's last 200 lines, holds nothing but noise and shutdown.
    assert find_fatal_cause(lines[-200:]) is None


# The other causes of FACTS.md in the same shape: each followed (and preceded) by noise.
@pytest.mark.parametrize("journal, name, line", [
    (ENGINE_JOURNAL, "kv_cache_too_small", ENGINE_JOURNAL[1]),
    (VALIDATION_JOURNAL, "validation_error",
     VALIDATION_JOURNAL[3] + " | Value error, prompt_lookup_min=5 must be <= prompt_lookup_max=4 [type=value_error]"),
    (["(EngineCore_DP0 pid=48201) ERROR 11-29 14:03:02 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. "
      "Tried to allocate 2.00 GiB.",
      "(EngineCore_DP0 pid=48201) ERROR 11-29 14:03:02 [multiproc_executor.py:315] Worker proc VllmWorker-3 died "
      "unexpectedly (exit code: 1), shutting down executor."], "cuda_out_of_memory", None),
    (CPU_JOURNAL, "cpu_out_of_memory", CPU_JOURNAL[1]),
    (CPU_KV_JOURNAL, "kv_cache_too_small", CPU_KV_JOURNAL[0]),
])
@pytest.mark.parametrize("before", [0, 5000])
def test_each_cause_is_found_behind_5000_lines_of_noise(journal, name, line, before):
    lines = nanobind_noise(before) + journal + nanobind_noise(5000) + ["x.service: Deactivated successfully."]

    cause = find_fatal_cause(lines)

    assert cause.name == name
    assert cause.describe() == (line or journal[0])


@pytest.mark.parametrize("code, summary, hint", [
    (-4, "engine worker killed by SIGILL (illegal instruction)", "dtype: float32"),
    (-11, "engine worker killed by SIGSEGV (segmentation fault)", None),
    (-7, "engine worker killed by SIGBUS (bus error)", "/dev/shm"),
    (-9, "engine worker killed by SIGKILL (killed)", "OOM killer"),
    (-6, "engine worker killed by SIGABRT (aborted)", None),
    (-10, "engine worker killed by SIGUSR1 (user defined signal 1)", None),
])
def test_negative_worker_exit_codes_name_their_signal(code, summary, hint):
    line = "(EngineCore pid=841) ERROR [multiproc_executor.py:315] Worker proc VllmWorker-1 died unexpectedly " \
           "(exit code: %d), shutting down executor." % code

    cause = find_fatal_cause(["INFO loading", line, "RuntimeError: cancelled"])

    assert (cause.name, cause.summary) == ("worker_signal", summary)
    assert (hint in cause.hint) if hint else cause.hint is None


def test_a_worker_that_exited_with_a_status_is_an_echo_of_the_exception_before_it():
    lines = ["(EngineCore pid=1) RuntimeError: NCCL error: unhandled system error",
             "(EngineCore pid=1) ERROR Worker proc VllmWorker-0 died unexpectedly (exit code: 1), shutting down."]

    assert find_fatal_cause(lines).line == lines[0]
    assert find_fatal_cause(lines[1:]).name == "engine_dead"
    # Logged by vLLM (level, time, source) rather than printed: still the exception.
    logged = "(EngineCore pid=1) ERROR 11-30 22:54:59 [core.py:1512] RuntimeError: NCCL error: unhandled system error"
    assert find_fatal_cause([logged, lines[1]]).line == logged
    assert find_fatal_cause(["(APIServer pid=1) WARNING 11-30 22:54:59 [x.py:1] ValueError: ignored"]) is None


@pytest.mark.parametrize("line, expected", [
    ("x.service: Main process exited, code=dumped, status=11/SEGV", "server process killed by SIGSEGV (segmentation fault)"),
    ("x.service: Main process exited, code=killed, status=9/KILL", "server process killed by SIGKILL (killed)"),
    # A stop asked for by systemd or a person is no crash.
    ("x.service: Main process exited, code=killed, status=15/TERM", None),
])
def test_systemds_record_of_a_killed_main_process(line, expected):
    cause = find_fatal_cause([line])

    assert (cause.summary if cause else None) == expected


def test_an_engine_that_died_behind_a_live_api_is_told_from_a_journal_that_only_failed_a_request():
    assert engine_died(["(APIServer pid=1) ERROR vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered "
                        "an issue. See stack trace (above) for the root cause."])
    assert not engine_died(['INFO:     127.0.0.1:56502 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error'])


def test_latest_phase_line_keeps_the_last_state_of_a_progress_bar():
    lines = [
        "(EngineCore_DP0 pid=48201) INFO 11-29 14:00:40 [gpu_model_runner.py:2602] Starting to load model /srv/kimi...",
        "Loading safetensors checkpoint shards:   0% Completed | 0/64 [00:00<?, ?it/s]\r"
        "Loading safetensors checkpoint shards:  45% Completed | 29/64 [07:12<08:41, 14.9s/it]",
        "(EngineCore_DP0 pid=48201) DEBUG 11-29 14:08:01 [shm_broadcast.py:466] No available shared memory broadcast block",
        "   ",
    ]

    assert latest_phase_line(lines) == "Loading safetensors checkpoint shards:  45% Completed | 29/64 [07:12<08:41, 14.9s/it]"


def test_latest_phase_line_falls_back_to_the_newest_line():
    assert latest_phase_line(["first", "second", ""]) == "second"
    assert latest_phase_line([]) is None


@pytest.mark.parametrize("text, unit", [
    ("0::/system.slice/vllm-kimi-k2.5-baseline.service\n", "vllm-kimi-k2.5-baseline.service"),
    # Delegated sub-cgroups below the service.
    ("0::/system.slice/vllm-tiny-ngram.service/engine\n", "vllm-tiny-ngram.service"),
    ("0::/user.slice/user-1000.slice/session-4.scope\n", "session-4.scope"),
    # cgroup v1: the name=systemd hierarchy is the one that names units.
    ("12:memory:/system.slice/other.service\n1:name=systemd:/system.slice/vllm-a.service\n", "vllm-a.service"),
    # Hybrid: the unified line wins.
    ("1:name=systemd:/system.slice/vllm-a.service\n0::/system.slice/vllm-a.service\n", "vllm-a.service"),
    ("0::/\n", None),
    ("0::/init.scope\n", "init.scope"),
    ("garbage\n", None),
    ("", None),
])
def test_unit_from_cgroup(text, unit):
    assert unit_from_cgroup(text) == unit


def test_unit_of_pid_reads_proc_and_tolerates_vanished_processes(monkeypatch, tmp_path):
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text("0::/system.slice/vllm-tiny-baseline.service\n", encoding="utf-8")
    monkeypatch.setattr(_systemd_unit, "PROC_ROOT", str(tmp_path))

    assert unit_of_pid(4242) == "vllm-tiny-baseline.service"
    assert unit_of_pid(4243) is None


class Commands:
    def __init__(self, *answers):
        self.answers = list(answers)
        self.argvs = []

    def __call__(self, argv):
        self.argvs.append(argv)
        return self.answers.pop(0)


def test_state_asks_systemctl_for_the_properties_it_needs():
    commands = Commands((0, SHOW_FAILED, ""))
    unit = SystemdUnit("vllm-tiny-ngram.service", commands, "/usr/bin/systemctl")

    assert unit.state().active_state == "failed"
    assert commands.argvs == [["/usr/bin/systemctl", "show", "vllm-tiny-ngram.service",
                               "--property=LoadState,ActiveState,SubState,Result,NRestarts,MainPID,ExecMainCode,"
                               "ExecMainStatus,InactiveExitTimestampMonotonic,ExecMainStartTimestampMonotonic,"
                               "ExecMainExitTimestampMonotonic,InvocationID"]]


def test_state_raises_when_systemctl_cannot_answer():
    unit = SystemdUnit("x.service", Commands((1, "", "System has not been booted with systemd as init system (PID 1).\n")),
                       "/bin/systemctl")

    with pytest.raises(UnitQueryError, match=r"systemctl show x.service failed \(rc 1\): System has not been booted"):
        unit.state()


def test_journal_tails_the_current_run(monkeypatch):
    class Clock:
        @staticmethod
        def time():
            return 1_790_000_100.0

        @staticmethod
        def monotonic():
            return 600.0

    monkeypatch.setattr(_systemd_unit, "time", Clock)
    commands = Commands((0, "line one\n\nline two\n", ""))
    unit = SystemdUnit("x.service", commands, "/bin/systemctl", "/bin/journalctl")

    assert unit.journal(50, since_monotonic=500.0) == ["line one", "line two"]
    assert commands.argvs == [["/bin/journalctl", "-u", "x.service", "-n", "50", "-o", "cat", "--no-pager",
                               "--since", "@1789999999"]]


def test_journal_without_a_known_start_and_journal_errors():
    commands = Commands((1, "", "Failed to get journal access: Permission denied\n"))
    unit = SystemdUnit("x.service", commands, "/bin/systemctl", "/bin/journalctl")

    assert unit.journal(20) == ["(journalctl failed, rc 1: Failed to get journal access: Permission denied)"]
    assert "--since" not in commands.argvs[0]


def test_journal_without_journalctl_is_empty():
    assert SystemdUnit("x.service", Commands(), "/bin/systemctl").journal(20) == []


class FixedClock:
    @staticmethod
    def time():
        return 1_790_000_100.0

    @staticmethod
    def monotonic():
        return 600.0


def test_journal_entries_come_with_their_monotonic_time_from_this_boot_only(monkeypatch):
    monkeypatch.setattr(_systemd_unit, "time", FixedClock)
    this_boot, other_boot = "6762053a77ea4076ae6690e3d50fdb82", "0a1b2c3d4e5f40718293a4b5c6d7e8f9"
    output = "\n".join([
        '{"__MONOTONIC_TIMESTAMP": "500250000", "_BOOT_ID": "%s", "MESSAGE": "Started x.service."}' % this_boot,
        '{"__MONOTONIC_TIMESTAMP": "501000000", "_BOOT_ID": "%s", "MESSAGE": [13, 76, 111, 97, 100, 255]}' % this_boot,
        '{"__MONOTONIC_TIMESTAMP": "502000000", "_BOOT_ID": "%s", "MESSAGE": "an older boot"}' % other_boot,
        '{"__MONOTONIC_TIMESTAMP": "503000000", "_BOOT_ID": "%s"}' % this_boot,
        'not json',
        '{"_BOOT_ID": "%s", "MESSAGE": "no time stamp"}' % this_boot,
    ]) + "\n"
    commands = Commands((0, output, ""))
    unit = SystemdUnit("x.service", commands, "/bin/systemctl", "/bin/journalctl")

    # /proc writes the boot ID with dashes, journald without.
    entries = unit.journal_entries(500.0, boot_id="6762053a-77ea-4076-ae66-90e3d50fdb82")

    assert entries == [(500.25, "Started x.service."), (501.0, "\rLoad\ufffd")]
    assert commands.argvs == [["/bin/journalctl", "-u", "x.service", "-b", "-n", "100000", "-o", "json",
                               "--output-fields=MESSAGE,_BOOT_ID", "--no-pager", "--since", "@1789999999"]]
    assert len(parse_journal_json(output)) == 3


def test_journal_entries_that_cannot_be_read_raise(monkeypatch):
    monkeypatch.setattr(_systemd_unit, "time", FixedClock)
    unit = SystemdUnit("x.service", Commands((1, "", "Failed to get journal access: Permission denied\n")),
                       "/bin/systemctl", "/bin/journalctl")
    with pytest.raises(JournalReadError, match=r"journalctl -u x.service failed \(rc 1\): Failed to get journal access"):
        unit.journal_entries(500.0)
    with pytest.raises(JournalReadError, match="journalctl is not in PATH"):
        SystemdUnit("x.service", Commands(), "/bin/systemctl").journal_entries(500.0)
