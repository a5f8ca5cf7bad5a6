# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils import _systemd_unit
from ansible_collections.llmops.vllm.plugins.module_utils._systemd_unit import (
    SystemdUnit,
    UnitQueryError,
    UnitState,
    find_fatal_line,
    latest_phase_line,
    parse_show,
    unit_from_cgroup,
    unit_of_pid,
    unit_problem,
)

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
                              "result": "exit-code", "n_restarts": 0, "main_pid": None, "exec_main_status": 1}
    assert unit.started_monotonic == pytest.approx(183920.114522)
    assert unit.exit_description() == "main process exited with status 1"


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
    (OOM_KILL_JOURNAL, OOM_KILL_JOURNAL[2]),
    (["INFO all is well", "vllm-tiny-ngram.service: Deactivated successfully."], None),
    ([], None),
])
def test_find_fatal_line_prefers_the_root_cause(lines, expected):
    assert find_fatal_line(lines) == expected


def test_engine_init_failure_is_quoted_when_the_cause_is_not_in_view():
    assert find_fatal_line(ENGINE_JOURNAL[2:]) == ENGINE_JOURNAL[2]


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
                               "ExecMainExitTimestampMonotonic"]]


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
