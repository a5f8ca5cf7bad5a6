# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import types

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils import _gpu_findings, _gpu_health
from ansible_collections.llmops.vllm.plugins.module_utils._gpu_memory import GpuQueryError

# As a driver before 535 answers: the throttle reasons by their old name, a placeholder for pages it does not retire.
OLD_DRIVER_ROW = ("0, GPU-1, NVIDIA RTX A6000, 00000000:4F:00.0, 550.127.05, Disabled, 0, 2, No, 210, 2100, "
                  "0x0000000000000008, 300.00, 300.00, 4, 4, 8, 16\n")
P2P = """ \tGPU0\tGPU1\tGPU2
 GPU0\tX\tOK\tCNS
 GPU1\tOK\tX\tCNS
 GPU2\tCNS\tCNS\tX

Legend:

  X    = Self
  OK   = Status Ok
"""


class FakeSmi:
    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv[1:])
        for prefix, answer in self.answers:
            if argv[1:2] == [prefix] or (argv[1:] and argv[1].startswith(prefix)):
                return answer
        return self.answers[-1][1] if not argv[1:] else (2, "", "unexpected")


def test_an_older_driver_is_asked_again_by_the_throttle_reasons_older_name():
    smi = FakeSmi([
        ("--query-gpu=index,uuid,name,pci.bus_id,driver_version,persistence_mode,ecc.errors.uncorrected.volatile.total,"
         "ecc.errors.uncorrected.aggregate.total,retired_pages.pending,clocks.sm,clocks.max.sm,clocks_event",
         (2, "", 'Field "clocks_event_reasons.active" is not a valid field to query.')),
        ("--query-gpu", (0, OLD_DRIVER_ROW, "")),
        ("--query-remapped-rows", (2, "", "Not supported")),
        ("topo", (0, P2P, "")),
        ("", (0, "| NVIDIA-SMI 550.127.05   Driver Version: 550.127.05   CUDA Version: 12.4 |", "")),
    ])

    gpus, node, notes = _gpu_health.NvidiaSmiHealth(smi, "nvidia-smi").read()

    assert "clocks_throttle_reasons.active" in smi.calls[1][0]
    assert gpus[0]["throttle_reasons"] == ["hw_slowdown"]
    assert gpus[0]["persistence_mode"] is False and gpus[0]["retired_pages_pending"] is False
    assert gpus[0]["remap_pending"] is None and gpus[0]["bus_id"] == "0000:4f:00.0"
    assert (gpus[0]["pcie_width"], gpus[0]["pcie_width_max"]) == (8, 16)
    assert node["cuda_driver_version"] == "12.4"
    assert node["p2p"][(0, 1)] == "OK" and node["p2p"][(2, 0)] == "CNS" and len(node["p2p"]) == 6
    assert notes[0].startswith("row remapping not reported")


def test_a_query_that_fails_otherwise_is_an_error():
    smi = FakeSmi([("--query-gpu", (9, "", "NVIDIA-SMI has failed because it couldn't communicate with the driver"))])

    with pytest.raises(GpuQueryError, match="couldn't communicate"):
        _gpu_health.NvidiaSmiHealth(smi, "nvidia-smi").read()


class FakeNvml(types.SimpleNamespace):
    """pynvml's calls for two GPUs; GPU 1 has a pending remap and no P2P to GPU 0."""

    class NVMLError(Exception):
        pass

    def __init__(self):
        super().__init__(NVML_P2P_CAPS_INDEX_READ=0, NVML_CLOCK_SM=1, shutdown=False)

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetUUID(self, handle):
        return b"GPU-%d" % handle

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA RTX PRO 6000 Blackwell Server Edition"

    def nvmlSystemGetDriverVersion(self):
        return "580.95.05"

    def nvmlSystemGetCudaDriverVersion(self):
        return 13000

    def nvmlDeviceGetPciInfo(self, handle):
        return types.SimpleNamespace(busId=b"00000000:%02X:00.0" % (0x18 + 0x10 * handle))

    def nvmlDeviceGetPersistenceMode(self, handle):
        return 1

    def nvmlDeviceGetTotalEccErrors(self, handle, kind, counter):
        return 0

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle):
        raise self.NVMLError("Not Supported")

    def nvmlDeviceGetRemappedRows(self, handle):
        return (0, 0, handle == 1, 0)

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return 180

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        return 2617

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 1

    def nvmlDeviceGetPowerManagementLimit(self, handle):
        return 600000

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle):
        return 600000

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        return 1

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return 16

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return 16

    def nvmlDeviceGetP2PStatus(self, first, second, caps):
        return 5 if 1 in (first, second) else 0


def test_nvml_gives_the_same_rows_and_matrix_as_nvidia_smi():
    nvml = FakeNvml()
    reader = _gpu_health.NvmlHealth(nvml)

    gpus, node, notes = reader.read()
    reader.close()

    assert nvml.shutdown and notes == []
    assert [gpu["remap_pending"] for gpu in gpus] == [False, True]
    assert gpus[0]["retired_pages_pending"] is None and gpus[0]["power_limit_w"] == 600.0
    assert gpus[1]["bus_id"] == "0000:28:00.0" and gpus[0]["throttle_reasons"] == ["gpu_idle"]
    assert node == {"driver_version": "580.95.05", "cuda_driver_version": "13.0", "p2p": {(0, 1): "NS", (1, 0): "NS"}}
    findings, settings = _gpu_findings.assess(gpus, node)
    assert [(finding["rule"], finding["gpu"]) for finding in findings] == [("row_remap_pending", 1),
                                                                           ("p2p_unsupported", None)]
    assert settings == {"NCCL_P2P_DISABLE": "1"}


def test_the_iommu_translating_for_a_gpu_is_named(tmp_path):
    for bus_id, kind in (("0000:18:00.0", "DMA-FQ"), ("0000:28:00.0", "identity")):
        group = tmp_path / "bus" / "pci" / "devices" / bus_id / "iommu_group"
        group.mkdir(parents=True)
        (group / "type").write_text(kind + "\n", encoding="utf-8")
    (tmp_path / "kernel" / "iommu_groups" / "7").mkdir(parents=True)

    state = _gpu_health.iommu_state(["0000:18:00.0", "0000:28:00.0", None], sysfs=str(tmp_path))

    assert state == {"enabled": True, "translating": ["0000:18:00.0"],
                     "types": {"0000:18:00.0": "DMA-FQ", "0000:28:00.0": "identity"}}
    assert _gpu_health.iommu_state(["0000:18:00.0"], sysfs=str(tmp_path / "none")) == {
        "enabled": False, "translating": [], "types": {}}


def gpu(index, **readings):
    row = {"index": index, "throttle_reasons": ["gpu_idle"], "pcie_gen": 1, "pcie_gen_max": 5}
    row.update(readings)
    return row


def test_p2p_that_works_through_a_translating_iommu_is_a_warning():
    node = {"p2p": {(0, 1): "OK", (1, 0): "OK"}, "iommu": {"translating": ["0000:18:00.0"]}}

    findings, settings = _gpu_findings.assess([gpu(0), gpu(1)], node)

    assert [(finding["rule"], finding["severity"]) for finding in findings] == [("p2p_iommu_translating", "warning")]
    assert settings == {}


def test_an_idle_link_below_its_generation_is_no_finding_and_a_busy_one_is():
    idle, _settings = _gpu_findings.assess([gpu(0)], {})
    busy, _settings = _gpu_findings.assess([gpu(0, throttle_reasons=[])], {})

    assert idle == []
    assert [finding["rule"] for finding in busy] == ["pcie_gen_below_max"]


def test_unknown_rule_names_are_listed():
    assert _gpu_findings.unknown_rules(["pcie_width_below_max", "p2p_unsuported"]) == ["p2p_unsuported"]
    assert set(_gpu_findings.RULE_NAMES) == set(_gpu_findings.RULES)
