# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import os
import pathlib

import pytest

from ansible.module_utils import basic
from ansible_collections.llmops.vllm.plugins.module_utils import _deadline, _gpu_memory, _systemd_unit
from ansible_collections.llmops.vllm.plugins.modules import wait_for_gpu_memory

from wait_fakes import FakeClock, run_module

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi"
NVIDIA_SMI = "/usr/bin/nvidia-smi"


def recorded(name):
    """A fixture; the query-gpu ones that hold only the memory columns get the two columns of a healthy GPU's fault
    probe (temperature.gpu, pstate) appended, as nvidia-smi answers the module's query."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    if not name.startswith("query-gpu-"):
        return text
    return "".join(line if line.rstrip().rsplit(",", 1)[-1].strip()[:1] in ("P", "[") and line.count(",") >= 6
                   else line.rstrip("\n") + ", 31, P8\n" for line in text.splitlines(True))


class FakeNvidiaSmi:
    """Answers the two queries from recorded outputs; each reading can differ (a GPU freeing up)."""

    def __init__(self, *readings, systemctl_rc=0, systemctl_err=""):
        self.readings = list(readings)
        self.commands = []
        self.systemctl_rc = systemctl_rc
        self.systemctl_err = systemctl_err

    def systemctl_calls(self):
        return [command for command in self.commands if command[0] == "systemctl"]

    def run_command(self, argv):
        self.commands.append(list(argv))
        if argv[0] == "systemctl":
            return self.systemctl_rc, "", self.systemctl_err
        assert argv[0] == NVIDIA_SMI and argv[2] == "--format=csv,noheader,nounits"
        current = self.readings[0]
        if argv[1] == "--query-gpu=index,uuid,name,memory.used,memory.total,temperature.gpu,pstate":
            return current.get("rc", 0), recorded(current["gpus"]) if "gpus" in current else "", current.get("err", "")
        assert argv[1] == "--query-compute-apps=pid,process_name,gpu_uuid,used_memory"
        if len(self.readings) > 1:
            self.readings.pop(0)
        return current.get("rc", 0), recorded(current["apps"]), current.get("err", "")


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(_deadline, "time", fake)
    return fake


@pytest.fixture
def proc(monkeypatch, tmp_path):
    """A /proc with the cgroup files of the processes the fixtures list."""
    cgroups = {
        48211: "0::/system.slice/vllm-kimi-k2.5-baseline.service\n",
        48218: "0::/system.slice/vllm-kimi-k2.5-baseline.service\n",
        # A worker orphaned by a SIGKILLed API server ends up in the operator's shell session.
        50102: "0::/user.slice/user-1000.slice/session-4.scope\n",
    }
    for pid, text in cgroups.items():
        os.makedirs(tmp_path / str(pid))
        (tmp_path / str(pid) / "cgroup").write_text(text, encoding="utf-8")
    (tmp_path / "48211" / "cmdline").write_bytes(b"VLLM::Worker_TP0\0")
    (tmp_path / "50102" / "cmdline").write_bytes(b"/opt/vllm/venv/bin/python3\0-m\0vllm.v1.engine.core\0")
    monkeypatch.setattr(_systemd_unit, "PROC_ROOT", str(tmp_path))
    return tmp_path


def use(monkeypatch, smi, nvml=None, nvidia_smi=NVIDIA_SMI):
    monkeypatch.setattr(_gpu_memory, "pynvml", nvml)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kwargs: smi.run_command(argv))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: nvidia_smi if name == "nvidia-smi" else None)


def run(monkeypatch, check_mode=False, **args):
    return run_module(monkeypatch, wait_for_gpu_memory, args, check_mode=check_mode)


# Node states written here in nvidia-smi's CSV format, not captures (see test__gpu_memory.py).
IDLE = {"gpus": "query-gpu-8x-idle.csv", "apps": "query-apps-empty.csv"}
# The processes have exited and the driver has not released their memory yet.
RELEASING = {"gpus": "query-gpu-8x-loaded.csv", "apps": "query-apps-empty.csv"}
LOADED = {"gpus": "query-gpu-8x-loaded.csv", "apps": "query-apps-vllm-tp8.csv"}
STRAY = {"gpus": "query-gpu-stray.csv", "apps": "query-apps-stray-na.csv"}


def test_idle_gpus_are_free_at_the_first_check(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi(IDLE)
    use(monkeypatch, smi)

    failed, result = run(monkeypatch)

    assert not failed
    assert result["source"] == "nvidia-smi"
    assert result["free"] is True
    assert result["attempts"] == 1 and result["elapsed"] == 0.0
    assert result["processes"] == []
    assert len(result["gpus"]) == 8
    assert result["gpus"][7] == {"index": 7, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                                 "memory_used_mib": 3, "memory_total_mib": 97887, "fault": None}
    assert result["msg"] == "GPU 0,1,2,3,4,5,6,7 free after 0.0 s"


def test_waits_while_the_stopped_server_releases_memory(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi(LOADED, LOADED, STRAY, IDLE)
    use(monkeypatch, smi)

    failed, result = run(monkeypatch, timeout=60, sleep=2)

    assert not failed
    assert result["attempts"] == 4
    assert clock.sleeps == [0.25, 0.5, 1.0]
    assert result["elapsed"] == 1.75


def test_timeout_names_every_holder_with_its_unit(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi(LOADED)
    use(monkeypatch, smi)

    failed, result = run(monkeypatch, timeout=30, sleep=5)

    assert failed
    assert result["elapsed"] == 30.0 and clock.elapsed() == 30.0
    assert result["attempts"] == len(clock.sleeps) + 1
    assert max(clock.sleeps) == 5.0
    assert result["free"] is False
    assert result["msg"].startswith("GPU memory still in use after 30.0 s (%d checks): GPU 0 uses 91254 MiB (limit 1024 MiB); "
                                    % result["attempts"])
    assert ("PID 48211 (VLLM::Worker_TP0, vllm-kimi-k2.5-baseline.service) holds GPU 0 (91236 MiB)"
            in result["msg"])
    # No cgroup file: the process is gone or in no unit.
    assert "PID 48212 (VLLM::Worker_TP1, no systemd unit) holds GPU 1 (91236 MiB)" in result["msg"]
    assert result["processes"][0] == {"pid": 48211, "name": "VLLM::Worker_TP0", "gpu_index": 0,
                                      "used_memory_mib": 91236, "unit": "vllm-kimi-k2.5-baseline.service",
                                      "command": "VLLM::Worker_TP0"}
    assert len(result["processes"]) == 8


def test_a_stray_without_reported_memory_still_blocks(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi(STRAY)
    use(monkeypatch, smi)

    failed, result = run(monkeypatch, gpus=[3], max_used_mib=100000, timeout=0)

    assert failed
    assert result["msg"] == ("GPU memory still in use after 0.0 s (1 checks): "
                             "PID 50102 (/opt/vllm/venv/bin/python3 -m vllm.v1.engine.core, session-4.scope) holds GPU 3")
    assert result["processes"] == [{"pid": 50102, "name": "VLLM::Worker_TP3", "gpu_index": 3,
                                    "used_memory_mib": None, "unit": "session-4.scope",
                                    "command": "/opt/vllm/venv/bin/python3 -m vllm.v1.engine.core"}]


def test_memory_released_after_the_processes_exit_is_waited_for_and_timed(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi(LOADED, RELEASING, RELEASING, RELEASING, IDLE)
    use(monkeypatch, smi)

    failed, result = run(monkeypatch, timeout=60, sleep=2)

    assert not failed
    assert result["attempts"] == 5
    # Found without processes at 0.25 s (after the first pause), free at 3.75 s.
    assert clock.sleeps == [0.25, 0.5, 1.0, 2.0]
    assert result["memory_release_seconds"] == 3.5


def test_memory_release_is_null_while_the_gpus_stay_busy(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi(RELEASING)
    use(monkeypatch, smi)

    failed, result = run(monkeypatch, timeout=0)

    assert failed
    assert result["memory_release_seconds"] is None
    assert result["processes"] == []
    assert result["msg"].startswith("GPU memory still in use after 0.0 s (1 checks): GPU 0 uses 91254 MiB")


def collect_warnings(monkeypatch):
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, text: warnings.append(text))
    return warnings


def test_orphans_of_the_listed_units_are_killed_once_and_the_wait_goes_on(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi(LOADED, LOADED, RELEASING, IDLE)
    use(monkeypatch, smi)
    warnings = collect_warnings(monkeypatch)

    units = ["vllm-kimi-k2.5-baseline.service", "vllm-kimi-k2.5-ngram.service"]
    failed, result = run(monkeypatch, timeout=60, kill_orphans_in=units)

    assert not failed
    assert result["changed"] is True
    # Killed at the first check only; the stop cancels Restart= without waiting for the unit.
    assert smi.systemctl_calls() == [["systemctl", "kill", "--signal=SIGKILL", "vllm-kimi-k2.5-baseline.service"],
                                     ["systemctl", "stop", "--no-block", "vllm-kimi-k2.5-baseline.service"]]
    assert [(orphan["pid"], orphan["gpu_index"], orphan["killed"]) for orphan in result["orphans"]] == [
        (48211, 0, True), (48218, 7, True)]
    assert result["orphans"][0]["command"] == "VLLM::Worker_TP0"
    assert result["msg"] == ("GPU 0,1,2,3,4,5,6,7 free after 1.8 s, once the orphans were killed: "
                             "PID 48211 (VLLM::Worker_TP0, vllm-kimi-k2.5-baseline.service) held GPU 0 (91236 MiB); "
                             "PID 48218 (VLLM::Worker_TP7, vllm-kimi-k2.5-baseline.service) held GPU 7 (91236 MiB)")
    assert warnings == ["killed the orphans of vllm-kimi-k2.5-baseline.service, which should run no process, with "
                        "SIGKILL: PID 48211 (VLLM::Worker_TP0, vllm-kimi-k2.5-baseline.service) holds GPU 0 (91236 MiB); "
                        "PID 48218 (VLLM::Worker_TP7, vllm-kimi-k2.5-baseline.service) holds GPU 7 (91236 MiB)"]


def test_a_holder_outside_the_listed_units_is_never_killed(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi(STRAY)
    use(monkeypatch, smi)

    failed, result = run(monkeypatch, gpus=[3], timeout=5, kill_orphans_in=["vllm-kimi-k2.5-baseline.service"])

    assert failed
    assert smi.systemctl_calls() == []
    assert result["orphans"] == [] and result["changed"] is False
    assert "PID 50102 (/opt/vllm/venv/bin/python3 -m vllm.v1.engine.core, session-4.scope) holds GPU 3" in result["msg"]


def test_check_mode_reports_orphans_without_killing_them(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi(LOADED)
    use(monkeypatch, smi)
    warnings = collect_warnings(monkeypatch)

    failed, result = run(monkeypatch, check_mode=True, kill_orphans_in=["vllm-kimi-k2.5-baseline.service"])

    assert not failed and result["changed"] is False
    assert smi.systemctl_calls() == []
    assert [orphan["killed"] for orphan in result["orphans"]] == [False, False]
    assert warnings[0].startswith("orphaned in vllm-kimi-k2.5-baseline.service, which should run no process: PID 48211")


def test_a_failed_kill_is_reported_and_the_timeout_names_the_orphan(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi(LOADED, systemctl_rc=1, systemctl_err="Failed to kill unit: Access denied")
    use(monkeypatch, smi)
    warnings = collect_warnings(monkeypatch)

    failed, result = run(monkeypatch, timeout=10, kill_orphans_in=["vllm-kimi-k2.5-baseline.service"])

    assert failed
    # One kill per unit, no stop after a kill that failed.
    assert smi.systemctl_calls() == [["systemctl", "kill", "--signal=SIGKILL", "vllm-kimi-k2.5-baseline.service"]]
    assert warnings[0].startswith("could not kill the orphans of vllm-kimi-k2.5-baseline.service "
                                  "(Failed to kill unit: Access denied): PID 48211")
    assert "PID 48211 (VLLM::Worker_TP0, vllm-kimi-k2.5-baseline.service) holds GPU 0" in result["msg"]


def test_orphaned_holders_groups_by_unit_and_skips_units_already_killed():
    processes = [{"pid": 1, "unit": "a.service"}, {"pid": 2, "unit": "b.service"}, {"pid": 3, "unit": None},
                 {"pid": 4, "unit": "a.service"}, {"pid": 5, "unit": "c.scope"}]

    assert _gpu_memory.orphaned_holders(processes, ["a.service", "b.service"]) == {
        "a.service": [processes[0], processes[3]], "b.service": [processes[1]]}
    assert _gpu_memory.orphaned_holders(processes, ["a.service", "b.service"], killed_units={"a.service"}) == {
        "b.service": [processes[1]]}
    assert _gpu_memory.orphaned_holders(processes, []) == {}


def test_only_the_selected_gpus_count(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi(STRAY)
    use(monkeypatch, smi)

    failed, result = run(monkeypatch, gpus=[0, 1, 2])

    assert not failed
    assert [gpu["index"] for gpu in result["gpus"]] == [0, 1, 2]
    assert result["processes"] == []


def test_memory_alone_when_processes_are_allowed(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi({"gpus": "query-gpu-mib-units.csv", "apps": "query-apps-mib-units.csv"})
    use(monkeypatch, smi)

    failed, result = run(monkeypatch, require_no_processes=False, max_used_mib=1024)

    assert not failed
    assert [gpu["memory_used_mib"] for gpu in result["gpus"]] == [1021, 0]
    assert [gpu["memory_total_mib"] for gpu in result["gpus"]] == [81559, 81559]
    # Still reported, so that the operator sees who is there.
    assert result["processes"][0]["used_memory_mib"] == 1016


def test_max_used_mib_is_a_limit_per_gpu(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi({"gpus": "query-gpu-mib-units.csv", "apps": "query-apps-empty.csv"})
    use(monkeypatch, smi)

    failed, result = run(monkeypatch, max_used_mib=1000, timeout=0)

    assert failed
    assert result["msg"] == "GPU memory still in use after 0.0 s (1 checks): GPU 0 uses 1021 MiB (limit 1000 MiB)"


def test_gpus_that_do_not_report_memory_are_judged_by_processes(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi({"gpus": "query-gpu-not-supported.csv", "apps": "query-apps-no-processes.txt"})
    use(monkeypatch, smi)
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning: warnings.append(warning))

    failed, result = run(monkeypatch)

    assert not failed
    assert result["gpus"] == [{"index": 0, "name": "NVIDIA GB10", "memory_used_mib": None, "memory_total_mib": None,
                               "fault": None}]
    # Said once, as what it is, rather than counted as 0 MiB.
    assert warnings == ["no selected GPU reports its memory use (GPU 0: [N/A], as on unified-memory systems such as "
                        "the GB10): max_used_mib was not applied and only the process list was checked"]


def test_an_unknown_gpu_index_is_a_clear_error(monkeypatch, clock, proc):
    use(monkeypatch, FakeNvidiaSmi(IDLE))

    failed, result = run(monkeypatch, gpus=[2, 9])

    assert failed
    assert result["msg"] == "no GPU with index 9; this host has 0,1,2,3,4,5,6,7"
    assert result["attempts"] == 1 and result["elapsed"] == 0.0


def test_an_empty_gpu_list_is_refused_rather_than_counted_as_free(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi(LOADED)
    use(monkeypatch, smi)

    failed, result = run(monkeypatch, gpus=[])

    assert failed
    assert result["msg"] == "gpus is an empty list, which selects no GPU; leave it unset to wait for all GPUs"
    assert result["attempts"] == 0


def test_a_failing_nvidia_smi_is_reported_not_raised(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi({"rc": 9, "err": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                                         "Make sure that the latest NVIDIA driver is installed and running.\n"})
    use(monkeypatch, smi)

    failed, result = run(monkeypatch)

    assert failed
    assert result["msg"] == ("/usr/bin/nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total,"
                             "temperature.gpu,pstate --format=csv,noheader,nounits failed (rc 9): NVIDIA-SMI has "
                             "failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
                             "latest NVIDIA driver is installed and running.")


def test_neither_nvml_nor_nvidia_smi_is_a_clear_error(monkeypatch, clock, proc):
    use(monkeypatch, FakeNvidiaSmi(IDLE), nvidia_smi=None)

    failed, result = run(monkeypatch)

    assert failed
    assert result["msg"] == ("cannot read GPU memory: the pynvml module (nvidia-ml-py) is not installed; "
                             "nvidia-smi is not in PATH")
    assert result["attempts"] == 0 and "elapsed" in result


def test_check_mode_reports_busy_gpus_without_waiting(monkeypatch, clock, proc):
    use(monkeypatch, FakeNvidiaSmi(LOADED))

    failed, result = run(monkeypatch, check_mode=True, timeout=600)

    assert not failed
    assert result["free"] is False and result["attempts"] == 1
    assert clock.sleeps == []
    assert result["msg"].startswith("GPU memory is in use: GPU 0 uses 91254 MiB (limit 1024 MiB)")


@pytest.mark.parametrize("args", [dict(timeout=-1), dict(sleep=0), dict(max_used_mib=-1)])
def test_nonsense_numbers_are_refused(monkeypatch, clock, proc, args):
    use(monkeypatch, FakeNvidiaSmi(IDLE))

    failed, result = run(monkeypatch, **args)

    assert failed
    assert result["msg"] == "timeout and max_used_mib must not be negative, sleep must be positive"


class FakeNvml:
    """The part of pynvml the reader uses, over two GPUs: one busy, one that cannot report memory."""

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    class _Memory:
        def __init__(self, used, total):
            self.used, self.total = used, total

    class _Process:
        def __init__(self, pid, used):
            self.pid, self.usedGpuMemory = pid, used

    def __init__(self, fail_init=False):
        self.fail_init = fail_init
        self.init_calls = 0
        self.shutdown = False

    def nvmlInit(self):
        self.init_calls += 1
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetUUID(self, handle):
        return "GPU-%d" % handle

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H200" if handle == 0 else "NVIDIA GB10"

    def nvmlDeviceGetMemoryInfo(self, handle):
        if handle == 1:
            raise self.NVMLError_NotSupported("Not Supported")
        return self._Memory(used=75 * 1024 ** 3, total=141 * 1024 ** 3)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [self._Process(48211, 75 * 1024 ** 3), self._Process(48299, None)] if handle == 0 else []

    def nvmlSystemGetProcessName(self, pid):
        if pid == 48299:
            raise self.NVMLError("Not Found")
        return b"VLLM::Worker_TP0"


def test_nvml_is_preferred_and_its_bytes_become_mib(monkeypatch, clock, proc):
    nvml = FakeNvml()
    smi = FakeNvidiaSmi(IDLE)
    use(monkeypatch, smi, nvml=nvml)

    failed, result = run(monkeypatch, timeout=0)

    assert failed
    assert smi.commands == []
    assert nvml.shutdown is True
    assert result["source"] == "nvml"
    assert result["gpus"] == [
        {"index": 0, "name": "NVIDIA H200", "memory_used_mib": 76800, "memory_total_mib": 144384, "fault": None},
        {"index": 1, "name": "NVIDIA GB10", "memory_used_mib": None, "memory_total_mib": None, "fault": None},
    ]
    assert result["processes"] == [
        {"pid": 48211, "name": "VLLM::Worker_TP0", "gpu_index": 0, "used_memory_mib": 76800,
         "unit": "vllm-kimi-k2.5-baseline.service", "command": "VLLM::Worker_TP0"},
        {"pid": 48299, "name": None, "gpu_index": 0, "used_memory_mib": None, "unit": None, "command": None},
    ]
    assert "PID 48299 (unknown process, no systemd unit) holds GPU 0" in result["msg"]


def test_nvml_that_cannot_start_falls_back_to_nvidia_smi(monkeypatch, clock, proc):
    smi = FakeNvidiaSmi(IDLE)
    nvml = FakeNvml(fail_init=True)
    use(monkeypatch, smi, nvml=nvml)

    failed, result = run(monkeypatch)

    assert not failed
    assert nvml.init_calls == 1
    assert result["source"] == "nvidia-smi"
    assert len(smi.commands) == 2


RESET_REQUIRED = {"gpus": "query-gpu-h100-reset-required.csv", "apps": "query-apps-empty.csv"}
# nvidia-smi exits non-zero when it cannot open a GPU, and says so on stderr; the other GPUs still read.
LOST_HANDLE = {"gpus": "query-gpu-lost-handle.csv", "apps": "query-apps-empty.csv", "rc": 15,
               "err": "Unable to determine the device handle for GPU0000:02:00.0: Unknown Error\n"}
RESET_REQUIRED_MSG = ("GPU memory cannot be counted free after 0.0 s (1 checks): GPU 1 is faulted (it reads "
                      "[GPU requires reset], so what it reports cannot be trusted); reset the GPU with nothing running "
                      "on it (nvidia-smi -r -i 1) or reboot the node")


def test_a_gpu_that_needs_a_reset_is_never_free_and_fails_at_once(monkeypatch, clock, proc):
    use(monkeypatch, FakeNvidiaSmi(RESET_REQUIRED))

    failed, result = run(monkeypatch, timeout=300)

    # It reads 0 MiB used, with no process: it would have counted as free.
    assert failed
    assert result["msg"] == RESET_REQUIRED_MSG
    assert result["attempts"] == 1 and clock.sleeps == []
    assert result["free"] is False and result["memory_release_seconds"] is None
    assert result["gpus"][1] == {"index": 1, "name": "NVIDIA H100 80GB HBM3", "memory_used_mib": None,
                                 "memory_total_mib": None, "fault": "GPU requires reset"}


def test_check_mode_names_the_faulted_gpu_without_failing(monkeypatch, clock, proc):
    use(monkeypatch, FakeNvidiaSmi(RESET_REQUIRED))

    failed, result = run(monkeypatch, check_mode=True)

    assert not failed and result["free"] is False
    assert result["msg"].startswith("GPU memory cannot be counted free: GPU 1 is faulted (it reads [GPU requires "
                                    "reset]")


def test_a_faulted_gpu_outside_the_selection_does_not_count(monkeypatch, clock, proc):
    use(monkeypatch, FakeNvidiaSmi(RESET_REQUIRED))

    failed, result = run(monkeypatch, gpus=[0])

    assert not failed and result["free"] is True


def test_a_gpu_nvidia_smi_cannot_open_is_faulted_and_the_others_still_read(monkeypatch, clock, proc):
    use(monkeypatch, FakeNvidiaSmi(LOST_HANDLE))
    warnings = collect_warnings(monkeypatch)

    failed, result = run(monkeypatch)

    assert failed
    assert [(gpu["index"], gpu["fault"]) for gpu in result["gpus"]] == [(0, None), (1, "Unknown Error"), (2, None)]
    assert result["msg"] == ("GPU memory cannot be counted free after 0.0 s (1 checks): GPU 1 is faulted (it reads "
                             "[Unknown Error], so what it reports cannot be trusted); reset the GPU with nothing "
                             "running on it (nvidia-smi -r -i 1) where the board supports a reset, else reboot the "
                             "node")
    assert warnings == []


class FaultyNvml:
    """pynvml's calls and error classes (as pynvml builds them from nvml.h's codes) over two H100s.

    faults: {gpu index: (the call that raises, its error class name)}. memory_v2: whether nvmlDeviceGetMemoryInfo
    takes version= (pynvml 11.5 and later) and, if so, "v2", or the error class its v2 call raises.
    """

    class NVMLError(Exception):
        value = None

    class NVMLError_NotSupported(NVMLError):
        value = 3

    class NVMLError_FunctionNotFound(NVMLError):
        value = 13

    class NVMLError_GpuIsLost(NVMLError):
        value = 15

    class NVMLError_ResetRequired(NVMLError):
        value = 16

    class NVMLError_Unknown(NVMLError):
        value = 999

    class _Memory:
        def __init__(self, used, total):
            self.used, self.total = used, total

    NVML_TEMPERATURE_GPU = 0

    def __init__(self, faults=None, memory_v2="v2"):
        self.faults = faults or {}
        self.memory_v2 = memory_v2
        self.memory_calls = []
        if memory_v2:
            self.nvmlMemory_v2 = 0x02000028

    def _maybe_fail(self, call, handle):
        fault = self.faults.get(handle)
        if fault and fault[0] == call:
            raise getattr(self, fault[1])()

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, index):
        self._maybe_fail("handle", index)
        return index

    def nvmlDeviceGetUUID(self, handle):
        return "GPU-%d" % handle

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetTemperature(self, handle, sensor):
        self._maybe_fail("temperature", handle)
        return 33

    def nvmlDeviceGetPerformanceState(self, handle):
        return 0

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        self.memory_calls.append(version)
        if version is not None:
            if not self.memory_v2:
                raise TypeError("nvmlDeviceGetMemoryInfo() got an unexpected keyword argument 'version'")
            if self.memory_v2 != "v2":
                raise getattr(self, self.memory_v2)()
            # v2's used leaves the driver's reserved memory out, as nvidia-smi's memory.used does.
            return self._Memory(used=1 * 1024 ** 2, total=81559 * 1024 ** 2)
        return self._Memory(used=540 * 1024 ** 2, total=81559 * 1024 ** 2)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return []

    def nvmlSystemGetProcessName(self, pid):
        return b"python"


@pytest.mark.parametrize("faults", [
    {1: ("temperature", "NVMLError_ResetRequired")},
    # Without nvidia-smi's sentinel, NVML's error code says the same: 16 is NVML_ERROR_RESET_REQUIRED.
    {1: ("handle", "NVMLError_ResetRequired")},
])
def test_nvml_gives_the_same_fault_as_nvidia_smi(monkeypatch, clock, proc, faults):
    use(monkeypatch, FakeNvidiaSmi(IDLE), nvml=FaultyNvml(faults))

    failed, result = run(monkeypatch)

    assert failed and result["source"] == "nvml"
    assert result["gpus"][1]["fault"] == "GPU requires reset"
    if faults[1][0] == "temperature":
        # The same GPU read through nvidia-smi gives the same words.
        assert result["msg"] == RESET_REQUIRED_MSG


def test_a_lost_gpu_through_nvml_is_a_finding_not_a_traceback(monkeypatch, clock, proc):
    use(monkeypatch, FakeNvidiaSmi(IDLE), nvml=FaultyNvml({0: ("handle", "NVMLError_GpuIsLost")}))

    failed, result = run(monkeypatch)

    assert failed
    assert [gpu["fault"] for gpu in result["gpus"]] == ["GPU is lost", None]
    assert "GPU 0 is faulted (it reads [GPU is lost], so what it reports cannot be trusted); reboot the node: a GPU " \
           "that fell off the bus does not come back without one" in result["msg"]


V2 = 0x02000028


@pytest.mark.parametrize("pynvml_has_v2, v2_answer, used, calls", [
    (True, "v2", 1, [V2, V2]),
    # A pynvml without nvmlMemory_v2; one whose call refuses the version argument (TypeError); a driver without
    # nvmlDeviceGetMemoryInfo_v2. Each reads v1, and asks v2 no more once it knows.
    (False, None, 540, [None, None]),
    (True, None, 540, [V2, None, None]),
    (True, "NVMLError_FunctionNotFound", 540, [V2, None, None]),
])
def test_nvml_memory_comes_from_v2_where_it_can(monkeypatch, clock, proc, pynvml_has_v2, v2_answer, used, calls):
    nvml = FaultyNvml(memory_v2=v2_answer)
    if pynvml_has_v2:
        nvml.nvmlMemory_v2 = V2
    elif hasattr(nvml, "nvmlMemory_v2"):
        del nvml.nvmlMemory_v2
    use(monkeypatch, FakeNvidiaSmi(IDLE), nvml=nvml)

    failed, result = run(monkeypatch)

    assert not failed
    assert [gpu["memory_used_mib"] for gpu in result["gpus"]] == [used, used]
    assert nvml.memory_calls == calls
