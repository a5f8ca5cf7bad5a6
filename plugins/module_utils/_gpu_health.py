# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPUs' health readings, through NVML or nvidia-smi, and the node's readings a tensor-parallel load depends on.

One row per GPU (persistence, ECC, retired pages, row remaps, clocks, throttle reasons, power limit, PCIe link)
and the node's: the driver's CUDA version, the peer-to-peer matrix and the IOMMU. A reading the GPU does not
report is None, as nvidia-smi's [N/A] is; what the readings mean is _gpu_findings'.
"""

from __future__ import annotations

import os
import re

from ansible_collections.llmops.vllm.plugins.module_utils._gpu_memory import GpuQueryError, csv_rows, text_field

CSV_FORMAT = "csv,noheader,nounits"
# name is the one free-text column (it may hold commas): two fields before it, the rest after it.
HEALTH_FIELDS = ("index", "uuid", "name", "pci.bus_id", "driver_version", "persistence_mode",
                 "ecc.errors.uncorrected.volatile.total", "ecc.errors.uncorrected.aggregate.total",
                 "retired_pages.pending", "clocks.sm", "clocks.max.sm", "clocks_event_reasons.active",
                 "power.limit", "power.default_limit", "pcie.link.gen.current", "pcie.link.gen.max",
                 "pcie.link.width.current", "pcie.link.width.max")
# Drivers before 535 call the throttle reasons by their older name.
OLD_FIELD_NAMES = {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}
REMAP_FIELDS = ("gpu_bus_id", "remapped_rows.pending", "remapped_rows.failure")

# NVML's clock event (throttle) reason bits, nvml.h's nvmlClocksEventReasons.
THROTTLE_REASONS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
# nvidia-smi topo -p2p r's legend, and NVML's nvmlGpuP2PStatus in the same order.
P2P_STATUS = {
    "OK": "supported",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "DRK": "disabled by registry key",
    "NS": "not supported",
    "U": "unknown",
}
NVML_P2P_STATUS = ("OK", "CNS", "GNS", "TNS", "DRK", "NS", "U")
_CUDA_VERSION = re.compile(r"CUDA Version\s*:\s*([0-9]+\.[0-9]+)")


def number(value):
    """A numeric field as int or float; None for the bracketed placeholders and a unit left in spite of nounits."""
    value = text_field(value)
    if value is None:
        return None
    word = value.split()[0]
    try:
        return int(word, 16) if word.lower().startswith("0x") else int(word)
    except ValueError:
        try:
            return float(word)
        except ValueError:
            return None


def flag(value):
    """Enabled/Disabled, Yes/No, 1/0; None when not reported."""
    value = text_field(value)
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("enabled", "yes", "1", "true", "on"):
        return True
    if lowered in ("disabled", "no", "0", "false", "off"):
        return False
    return None


def throttle_names(mask):
    """The named reasons set in a throttle (clock event) bit mask."""
    if mask is None:
        return None
    return [name for bit, name in THROTTLE_REASONS if mask & bit]


def _bus_id(value):
    """PCI bus ids in sysfs's form: nvidia-smi pads the domain to 8 digits, sysfs to 4."""
    value = (text_field(value) or "").lower()
    parts = value.split(":")
    if len(parts) == 3:
        try:
            return "%04x:%s:%s" % (int(parts[0], 16), parts[1], parts[2])
        except ValueError:
            pass
    return value or None


def parse_health(output, fields=HEALTH_FIELDS):
    """One row per GPU from `--query-gpu=<HEALTH_FIELDS>` CSV."""
    rows = []
    for values in csv_rows(output, 2, len(fields) - 3):
        raw = dict(zip(fields, values))
        try:
            index = int(raw["index"])
        except ValueError:
            raise GpuQueryError("unexpected GPU index %r in nvidia-smi output" % raw["index"]) from None
        mask = number(raw.get("clocks_event_reasons.active", raw.get("clocks_throttle_reasons.active", "")))
        rows.append({
            "index": index,
            "uuid": text_field(raw["uuid"]),
            "name": text_field(raw["name"]),
            "bus_id": _bus_id(raw["pci.bus_id"]),
            "driver_version": text_field(raw["driver_version"]),
            "persistence_mode": flag(raw["persistence_mode"]),
            "ecc_volatile_uncorrected": number(raw["ecc.errors.uncorrected.volatile.total"]),
            "ecc_aggregate_uncorrected": number(raw["ecc.errors.uncorrected.aggregate.total"]),
            "retired_pages_pending": flag(raw["retired_pages.pending"]),
            "remap_pending": None,
            "remap_failed": None,
            "clock_sm_mhz": number(raw["clocks.sm"]),
            "clock_sm_max_mhz": number(raw["clocks.max.sm"]),
            "throttle_mask": mask,
            "throttle_reasons": throttle_names(mask),
            "power_limit_w": number(raw["power.limit"]),
            "power_default_limit_w": number(raw["power.default_limit"]),
            "pcie_gen": number(raw["pcie.link.gen.current"]),
            "pcie_gen_max": number(raw["pcie.link.gen.max"]),
            "pcie_width": number(raw["pcie.link.width.current"]),
            "pcie_width_max": number(raw["pcie.link.width.max"]),
        })
    return rows


def parse_remapped_rows(output):
    """{bus id: (pending, failed)} from `--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure`."""
    remaps = {}
    for line in output.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != len(REMAP_FIELDS) or not fields[0]:
            continue
        remaps[_bus_id(fields[0])] = (flag(fields[1]), flag(fields[2]))
    return remaps


def parse_p2p(output):
    """{(a, b): status} for a != b from `nvidia-smi topo -p2p r`; the legend after the matrix is ignored."""
    matrix = {}
    columns = None
    for line in output.splitlines():
        words = line.split()
        if not words:
            continue
        if columns is None:
            if all(word.startswith("GPU") for word in words):
                columns = [int(word[3:]) for word in words]
            continue
        if not words[0].startswith("GPU") or len(words) != len(columns) + 1:
            break
        row = int(words[0][3:])
        for column, status in zip(columns, words[1:]):
            if column != row:
                matrix[(row, column)] = status.upper()
    return matrix


def parse_cuda_version(output):
    """The CUDA version the driver supports, from nvidia-smi's summary header ("CUDA Version: 12.8")."""
    match = _CUDA_VERSION.search(output or "")
    return match.group(1) if match else None


class NvidiaSmiHealth:
    source = "nvidia-smi"

    def __init__(self, run_command, nvidia_smi):
        self._run_command = run_command
        self._nvidia_smi = nvidia_smi

    def _run(self, argv):
        rc, out, err = self._run_command([self._nvidia_smi] + argv)
        return rc, out, (err or out).strip()

    def _gpus(self):
        fields = HEALTH_FIELDS
        rc, out, err = self._run(["--query-gpu=" + ",".join(fields), "--format=" + CSV_FORMAT])
        if rc != 0 and "not a valid field" in err:
            fields = tuple(OLD_FIELD_NAMES.get(field, field) for field in fields)
            rc, out, err = self._run(["--query-gpu=" + ",".join(fields), "--format=" + CSV_FORMAT])
        if rc != 0:
            raise GpuQueryError("nvidia-smi --query-gpu failed (rc %d): %s" % (rc, err))
        return parse_health(out, fields)

    def read(self):
        """(gpus, node, notes): notes say which readings this node's nvidia-smi could not give."""
        gpus, notes = self._gpus(), []
        rc, out, err = self._run(["--query-remapped-rows=" + ",".join(REMAP_FIELDS), "--format=" + CSV_FORMAT])
        if rc == 0:
            remaps = parse_remapped_rows(out)
            for gpu in gpus:
                gpu["remap_pending"], gpu["remap_failed"] = remaps.get(gpu["bus_id"], (None, None))
        else:
            notes.append("row remapping not reported (GPUs before Ampere retire pages instead): %s" % err)
        rc, out, err = self._run(["topo", "-p2p", "r"])
        p2p = parse_p2p(out) if rc == 0 else None
        if p2p is None:
            notes.append("the peer-to-peer matrix was not reported: %s" % err)
        rc, out, err = self._run([])
        node = {"driver_version": gpus[0]["driver_version"] if gpus else None,
                "cuda_driver_version": parse_cuda_version(out) if rc == 0 else None,
                "p2p": p2p}
        return gpus, node, notes

    def close(self):
        pass


class NvmlHealth:
    source = "nvml"

    def __init__(self, nvml):
        self._nvml = nvml
        nvml.nvmlInit()

    def _call(self, name, *args):
        """An NVML reading, or None where this GPU or driver does not give it (nvidia-smi's [N/A])."""
        function = getattr(self._nvml, name, None)
        if function is None:
            return None
        try:
            return function(*args)
        except self._nvml.NVMLError:
            return None

    @staticmethod
    def _text(value):
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value

    def _gpu(self, index, handle):
        nvml = self._nvml
        pci = self._call("nvmlDeviceGetPciInfo", handle)
        remaps = self._call("nvmlDeviceGetRemappedRows", handle)
        mask = self._call("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if mask is None:
            mask = self._call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        uncorrected = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        limit = self._call("nvmlDeviceGetPowerManagementLimit", handle)
        default_limit = self._call("nvmlDeviceGetPowerManagementDefaultLimit", handle)
        persistence = self._call("nvmlDeviceGetPersistenceMode", handle)
        pending_pages = self._call("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        return {
            "index": index,
            "uuid": self._text(self._call("nvmlDeviceGetUUID", handle)),
            "name": self._text(self._call("nvmlDeviceGetName", handle)),
            "bus_id": _bus_id(self._text(pci.busId)) if pci is not None else None,
            "driver_version": self._text(self._call("nvmlSystemGetDriverVersion")),
            "persistence_mode": None if persistence is None else bool(persistence),
            "ecc_volatile_uncorrected": self._call("nvmlDeviceGetTotalEccErrors", handle, uncorrected,
                                                   getattr(nvml, "NVML_VOLATILE_ECC", 0)),
            "ecc_aggregate_uncorrected": self._call("nvmlDeviceGetTotalEccErrors", handle, uncorrected,
                                                    getattr(nvml, "NVML_AGGREGATE_ECC", 1)),
            "retired_pages_pending": None if pending_pages is None else bool(pending_pages),
            # (correctable rows, uncorrectable rows, pending, failure occurred)
            "remap_pending": bool(remaps[2]) if remaps is not None else None,
            "remap_failed": bool(remaps[3]) if remaps is not None else None,
            "clock_sm_mhz": self._call("nvmlDeviceGetClockInfo", handle, getattr(nvml, "NVML_CLOCK_SM", 1)),
            "clock_sm_max_mhz": self._call("nvmlDeviceGetMaxClockInfo", handle, getattr(nvml, "NVML_CLOCK_SM", 1)),
            "throttle_mask": mask,
            "throttle_reasons": throttle_names(mask),
            "power_limit_w": limit / 1000.0 if limit is not None else None,
            "power_default_limit_w": default_limit / 1000.0 if default_limit is not None else None,
            "pcie_gen": self._call("nvmlDeviceGetCurrPcieLinkGeneration", handle),
            "pcie_gen_max": self._call("nvmlDeviceGetMaxPcieLinkGeneration", handle),
            "pcie_width": self._call("nvmlDeviceGetCurrPcieLinkWidth", handle),
            "pcie_width_max": self._call("nvmlDeviceGetMaxPcieLinkWidth", handle),
        }

    def read(self):
        nvml = self._nvml
        handles = [nvml.nvmlDeviceGetHandleByIndex(index) for index in range(nvml.nvmlDeviceGetCount())]
        gpus = [self._gpu(index, handle) for index, handle in enumerate(handles)]
        p2p = {}
        read_caps = getattr(nvml, "NVML_P2P_CAPS_INDEX_READ", 0)
        for row, first in enumerate(handles):
            for column, second in enumerate(handles):
                if row != column:
                    status = self._call("nvmlDeviceGetP2PStatus", first, second, read_caps)
                    p2p[(row, column)] = NVML_P2P_STATUS[status] if status in range(len(NVML_P2P_STATUS)) else "U"
        cuda = self._call("nvmlSystemGetCudaDriverVersion")
        node = {"driver_version": gpus[0]["driver_version"] if gpus else None,
                "cuda_driver_version": "%d.%d" % (cuda // 1000, cuda % 1000 // 10) if cuda else None,
                "p2p": p2p}
        return gpus, node, []

    def close(self):
        self._nvml.nvmlShutdown()


def iommu_state(bus_ids, sysfs="/sys"):
    """Whether DMA of each GPU goes through IOMMU translation: {"enabled", "translating": [bus ids], "types"}.

    A device's IOMMU group type is "identity" in passthrough (iommu=pt) and "DMA" or "DMA-FQ" when the IOMMU
    translates, which is where peer-to-peer over PCIe is reported to hang.
    """
    groups = os.path.join(sysfs, "kernel", "iommu_groups")
    enabled = os.path.isdir(groups) and bool(os.listdir(groups))
    types = {}
    for bus_id in bus_ids:
        if not bus_id:
            continue
        try:
            with open(os.path.join(sysfs, "bus", "pci", "devices", bus_id, "iommu_group", "type"),
                      encoding="utf-8") as handle:
                types[bus_id] = handle.read().strip()
        except OSError:
            continue
    translating = sorted(bus_id for bus_id, kind in types.items() if kind.upper().startswith("DMA"))
    return {"enabled": enabled, "translating": translating, "types": types}


def free_gib(path):
    """Free space for the service user at path (or the nearest directory above it that exists), in GiB."""
    while path and not os.path.isdir(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    stats = os.statvfs(path or "/")
    return round(stats.f_bavail * stats.f_frsize / float(1 << 30), 1)
