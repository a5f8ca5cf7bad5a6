# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPUs' health readings, through NVML or nvidia-smi, and the node's readings a tensor-parallel load depends on.

One row per GPU (a fault, persistence, ECC mode and errors, retired pages, row remaps, clocks, throttle reasons,
power limit, PCIe link) and the node's: the driver's CUDA version, the peer-to-peer matrix, the IOMMU, the Xid
events in the kernel log, the device node CUDA's unified memory needs (/dev/nvidia-uvm) and the PCIe Access Control
Services (ACS) of the bridges above the GPUs. A reading the GPU does not report is None, as nvidia-smi's [N/A] is;
a GPU that is faulted (NVML's "GPU requires reset", "GPU is lost", "Unknown Error") has its fault and no other
reading. What the readings mean is _gpu_findings'.
"""

from __future__ import annotations

import os
import re

from ansible_collections.llmops.vllm.plugins.module_utils._gpu_memory import (
    GpuFault,
    GpuQueryError,
    fault_text,
    gpu_rows,
    lost_gpu_lines,
    nvml_fault,
    text_field,
)

CSV_FORMAT = "csv,noheader,nounits"
# name is the one free-text column (it may hold commas): two fields before it, the rest after it. temperature.gpu is
# read only because a faulted GPU reads [GPU requires reset] there while other columns may still read; pstate for that
# too, and to tell a link generation read under load from one read at idle (_pcie_links).
HEALTH_FIELDS = ("index", "uuid", "name", "pci.bus_id", "driver_version", "persistence_mode",
                 "ecc.errors.uncorrected.volatile.total", "ecc.errors.uncorrected.aggregate.total",
                 "retired_pages.pending", "clocks.sm", "clocks.max.sm", "clocks_event_reasons.active",
                 "power.limit", "power.default_limit", "pcie.link.gen.current", "pcie.link.gen.max",
                 "pcie.link.width.current", "pcie.link.width.max", "ecc.mode.current", "temperature.gpu", "pstate")
# Drivers before 535 call the throttle reasons by their older name.
OLD_FIELD_NAMES = {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}
REMAP_FIELDS = ("gpu_bus_id", "remapped_rows.pending", "remapped_rows.failure")
# The keys of a GPU's row, whichever way it was read.
ROW_KEYS = ("index", "uuid", "name", "bus_id", "fault", "driver_version", "persistence_mode", "ecc_mode",
            "ecc_volatile_uncorrected", "ecc_aggregate_uncorrected", "retired_pages_pending", "remap_pending",
            "remap_failed", "clock_sm_mhz", "clock_sm_max_mhz", "throttle_mask", "throttle_reasons", "power_limit_w",
            "power_default_limit_w", "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max", "pstate")

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
# nvidia-smi topo -p2p r's legend (DR in current drivers, DRK in older ones), and NVML's nvmlGpuP2PStatus in order.
P2P_STATUS = {
    "OK": "supported",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "DR": "disabled by registry key",
    "DRK": "disabled by registry key",
    "NS": "not supported",
    "U": "unknown",
}
NVML_P2P_STATUS = ("OK", "CNS", "GNS", "TNS", "DR", "NS", "U")
# Drivers from 610 on print "CUDA UMD Version: 13.3" where older ones print "CUDA Version: 12.8".
_CUDA_VERSION = re.compile(r"CUDA (?:UMD )?Version\s*:\s*([0-9]+\.[0-9]+)")
# Terminal escape sequences: nvidia-smi underlines topo's header with ESC[4m ... ESC[0m even into a pipe.
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# A PCI function's address in sysfs's form, as the components of a device's resolved sysfs path name its bridges.
_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
# lspci -vvv's line for the ACS Control register, "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ ...".
_ACS_CONTROL = re.compile(r"^\s*ACSCtl:\s*(.*?)\s*$", re.MULTILINE)
# The ACS controls that send peer-to-peer requests and completions up to the root complex instead of across.
ACS_REDIRECT = ("ReqRedir", "CmpltRedir")
# The driver's Xid line, "NVRM: Xid (PCI:0000:2b:00): 79, pid=..., GPU has fallen off the bus."; drivers before 400
# left out "PCI:".
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-9a-fA-F])?\): "
                  r"(\d+)\s*,?\s*(.*)$")


def strip_escapes(text):
    """Text without terminal escape sequences."""
    return _ESCAPE.sub("", text or "")


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


def empty_row(index, fault=None, **known):
    """A GPU's row with nothing read: what a faulted GPU gives."""
    row = dict((key, None) for key in ROW_KEYS)
    row.update(known, index=index, fault=fault)
    return row


def parse_health(output, fields=HEALTH_FIELDS, errors=""):
    """One row per GPU from `--query-gpu=<HEALTH_FIELDS>` CSV, a faulted GPU's included (see gpu_rows)."""
    rows = []
    for index, values, fault in gpu_rows(output, 2, len(fields) - 3, errors):
        raw = dict(zip(fields, values or ()))
        if fault or values is None:
            rows.append(empty_row(index, fault, uuid=text_field(raw.get("uuid", "")),
                                  name=text_field(raw.get("name", "")), bus_id=_bus_id(raw.get("pci.bus_id", ""))))
            continue
        mask = number(raw.get("clocks_event_reasons.active", raw.get("clocks_throttle_reasons.active", "")))
        rows.append({
            "index": index,
            "uuid": text_field(raw["uuid"]),
            "name": text_field(raw["name"]),
            "bus_id": _bus_id(raw["pci.bus_id"]),
            "fault": None,
            "driver_version": text_field(raw["driver_version"]),
            "persistence_mode": flag(raw["persistence_mode"]),
            "ecc_mode": flag(raw.get("ecc.mode.current", "")),
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
            "pstate": _pstate(raw.get("pstate", "")),
        })
    return rows


def _pstate(text):
    """P0 to P15 as nvidia-smi writes it; None for [N/A], [Unknown] or nothing."""
    text = text_field(text)
    return text if text and text[0] == "P" and text[1:].isdigit() else None


def parse_remapped_rows(output):
    """{bus id: (pending, failed)} from `--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure`."""
    remaps = {}
    for line in output.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != len(REMAP_FIELDS) or not fields[0] or fields[0].startswith("["):
            continue
        remaps[_bus_id(fields[0])] = (flag(fields[1]), flag(fields[2]))
    return remaps


def _gpu_number(word):
    if word.startswith("GPU") and word[3:].isdigit():
        return int(word[3:])
    return None


def parse_p2p(output):
    """{(a, b): status} for a != b from `nvidia-smi topo -p2p r`; the legend after the matrix is ignored.

    The header's underline escapes are removed first; a matrix that cannot be read gives fewer pairs (or none),
    which the preflight reports as p2p_unreadable rather than as a pass.
    """
    matrix = {}
    columns = None
    for line in strip_escapes(output).splitlines():
        words = line.split()
        if not words:
            continue
        if columns is None:
            numbers = [_gpu_number(word) for word in words]
            if None not in numbers:
                columns = numbers
            continue
        row = _gpu_number(words[0])
        if row is None or len(words) != len(columns) + 1:
            break
        for column, status in zip(columns, words[1:]):
            if column != row:
                matrix[(row, column)] = status.upper()
    return matrix


def parse_cuda_version(output):
    """The CUDA version the driver supports, from nvidia-smi's summary header ("CUDA Version: 12.8")."""
    match = _CUDA_VERSION.search(output or "")
    return match.group(1) if match else None


def parse_xids(text, gpus=()):
    """Xid events in kernel log text: [{"xid", "bus_id", "gpu", "count", "message"}], one per Xid and GPU, in order.

    gpu is the index of the GPU on that bus (from gpus' bus_id), None for a bus no GPU read has; message is the
    first event's text.
    """
    index_of = {}
    for gpu in gpus:
        if gpu.get("bus_id"):
            index_of[gpu["bus_id"].rsplit(".", 1)[0]] = gpu["index"]
    events = {}
    for line in (text or "").splitlines():
        match = _XID.search(line)
        if not match:
            continue
        bus = _bus_id(match.group(1) + ".0").rsplit(".", 1)[0]
        key = (int(match.group(2)), bus)
        if key not in events:
            events[key] = {"xid": key[0], "bus_id": bus, "gpu": index_of.get(bus), "count": 0,
                           "message": match.group(3).strip()}
        events[key]["count"] += 1
    return list(events.values())


class NvidiaSmiHealth:
    source = "nvidia-smi"

    def __init__(self, run_command, nvidia_smi):
        self._run_command = run_command
        self._nvidia_smi = nvidia_smi

    def _run(self, argv):
        """(rc, stdout, stderr, what to quote): nvidia-smi exits non-zero when it cannot open a GPU."""
        rc, out, err = self._run_command([self._nvidia_smi] + argv)
        return rc, out or "", err or "", (err or out or "").strip()

    def _gpus(self):
        fields = HEALTH_FIELDS
        rc, out, err, said = self._run(["--query-gpu=" + ",".join(fields), "--format=" + CSV_FORMAT])
        if rc != 0 and "not a valid field" in said:
            fields = tuple(OLD_FIELD_NAMES.get(field, field) for field in fields)
            rc, out, err, said = self._run(["--query-gpu=" + ",".join(fields), "--format=" + CSV_FORMAT])
        if rc != 0 and not lost_gpu_lines(out, err):
            raise GpuQueryError("nvidia-smi --query-gpu failed (rc %d): %s" % (rc, said))
        return parse_health(out, fields, err)

    def read(self):
        """(gpus, node, notes): notes say which readings this node's nvidia-smi could not give."""
        gpus, notes = self._gpus(), []
        rc, out, err, said = self._run(["--query-remapped-rows=" + ",".join(REMAP_FIELDS), "--format=" + CSV_FORMAT])
        if rc == 0 or lost_gpu_lines(out, err):
            remaps = parse_remapped_rows(out)
            for gpu in gpus:
                if not gpu["fault"]:
                    gpu["remap_pending"], gpu["remap_failed"] = remaps.get(gpu["bus_id"], (None, None))
        else:
            notes.append("row remapping not reported (GPUs before Ampere retire pages instead): %s" % said)
        rc, out, err, said = self._run(["topo", "-p2p", "r"])
        p2p = parse_p2p(out) if rc == 0 else None
        rc, summary, err, _said = self._run([])
        working = [gpu for gpu in gpus if not gpu["fault"]]
        node = {"driver_version": working[0]["driver_version"] if working else None,
                # The summary still prints its header when a GPU cannot be opened.
                "cuda_driver_version": parse_cuda_version(summary),
                "p2p": p2p, "p2p_error": None if p2p is not None else said}
        return gpus, node, notes

    def close(self):
        pass


class NvmlHealth:
    source = "nvml"

    def __init__(self, nvml):
        self._nvml = nvml
        nvml.nvmlInit()

    def _call(self, name, *args):
        """An NVML reading, or None where this GPU or driver does not give it (nvidia-smi's [N/A]).

        A faulted GPU raises GpuFault, as nvidia-smi writes [GPU requires reset] for it.
        """
        function = getattr(self._nvml, name, None)
        if function is None:
            return None
        try:
            return function(*args)
        except self._nvml.NVMLError as exc:
            fault = nvml_fault(exc)
            if fault:
                raise GpuFault(fault) from None
            return None

    @staticmethod
    def _text(value):
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value

    def _gpu(self, index, handle):
        nvml = self._nvml
        self._call("nvmlDeviceGetTemperature", handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
        pstate = self._call("nvmlDeviceGetPerformanceState", handle)
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
        # (current, pending)
        ecc_mode = self._call("nvmlDeviceGetEccMode", handle)
        return {
            "index": index,
            "uuid": self._text(self._call("nvmlDeviceGetUUID", handle)),
            "name": self._text(self._call("nvmlDeviceGetName", handle)),
            "bus_id": _bus_id(self._text(pci.busId)) if pci is not None else None,
            "fault": None,
            "driver_version": self._text(self._call("nvmlSystemGetDriverVersion")),
            "persistence_mode": None if persistence is None else bool(persistence),
            "ecc_mode": bool(ecc_mode[0]) if ecc_mode is not None else None,
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
            # NVML_PSTATE_0 to _15 are 0 to 15; NVML_PSTATE_UNKNOWN is 32.
            "pstate": "P%d" % pstate if isinstance(pstate, int) and 0 <= pstate <= 15 else None,
        }

    def _identity(self, handle):
        """What a faulted GPU may still say about itself, as nvidia-smi's row of it may still name it."""
        known = {}
        for key, name in (("uuid", "nvmlDeviceGetUUID"), ("name", "nvmlDeviceGetName"),
                          ("bus_id", "nvmlDeviceGetPciInfo")):
            try:
                value = self._call(name, handle)
            except GpuFault:
                continue
            if key == "bus_id":
                value = _bus_id(self._text(value.busId)) if value is not None else None
            known[key] = self._text(value)
        return known

    def _p2p(self, first, second, read_caps):
        try:
            status = self._call("nvmlDeviceGetP2PStatus", first, second, read_caps)
        except GpuFault:
            return None
        return NVML_P2P_STATUS[status] if status in range(len(NVML_P2P_STATUS)) else None

    def read(self):
        nvml = self._nvml
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            raise GpuQueryError("NVML could not count the GPUs: %s" % exc) from None
        gpus, handles = [], {}
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except nvml.NVMLError as exc:
                # nvidia-smi's "Unable to determine the device handle for GPU...".
                gpus.append(empty_row(index, nvml_fault(exc) or fault_text(str(exc))))
                continue
            try:
                gpus.append(self._gpu(index, handle))
                handles[index] = handle
            except GpuFault as fault:
                gpus.append(empty_row(index, fault.fault, **self._identity(handle)))
        p2p = {}
        read_caps = getattr(nvml, "NVML_P2P_CAPS_INDEX_READ", 0)
        for row, first in handles.items():
            for column, second in handles.items():
                if row != column:
                    status = self._p2p(first, second, read_caps)
                    if status is not None:
                        p2p[(row, column)] = status
        try:
            cuda = self._call("nvmlSystemGetCudaDriverVersion")
        except GpuFault:
            cuda = None
        working = [gpu for gpu in gpus if not gpu["fault"]]
        node = {"driver_version": working[0]["driver_version"] if working else None,
                "cuda_driver_version": "%d.%d" % (cuda // 1000, cuda % 1000 // 10) if cuda else None,
                "p2p": p2p, "p2p_error": None}
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


def nvidia_uvm_state(dev="/dev", nvidia_modprobe="/usr/bin/nvidia-modprobe"):
    """What CUDA's first use needs from the node: {"nvidia_devices", "uvm", "nvidia_modprobe"}, each a bool.

    nvidia_devices: the driver's device nodes exist (dev/nvidiactl or dev/nvidia0); a node without them (the mock host)
    has nothing to judge. uvm: dev/nvidia-uvm exists. nvidia_modprobe: nvidia_modprobe is an executable file, the
    setuid program through which CUDA loads nvidia_uvm and creates dev/nvidia-uvm, and which the vllm_service unit
    runs as root before the server (ExecStartPre=+) where the node has it.
    """
    return {
        "nvidia_devices": any(os.path.exists(os.path.join(dev, name)) for name in ("nvidiactl", "nvidia0")),
        "uvm": os.path.exists(os.path.join(dev, "nvidia-uvm")),
        "nvidia_modprobe": os.path.isfile(nvidia_modprobe) and os.access(nvidia_modprobe, os.X_OK),
    }


def upstream_bridges(bus_id, sysfs="/sys"):
    """The PCI addresses of the bridges above a device, nearest first; None where sysfs has no such device.

    /sys/bus/pci/devices/<bus id> links to the device's place in the tree, such as
    /sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:08.0/0000:83:00.0: every address before its own is a
    bridge it hangs under (a root port, a switch's upstream and downstream ports).
    """
    path = os.path.join(sysfs, "bus", "pci", "devices", bus_id)
    if not os.path.exists(path):
        return None
    chain = [part for part in os.path.realpath(path).split(os.sep) if _PCI_ADDRESS.match(part)]
    if chain and chain[-1] == bus_id:
        chain = chain[:-1]
    return chain[::-1]


def parse_acs_control(output):
    """The ACS Control flags of `lspci -vvv -s <bridge>`: {"SrcValid": True, "ReqRedir": False, ...}.

    None where the output has no ACSCtl line: the bridge has no ACS capability, or lspci could not read its extended
    capabilities (without root it prints "Capabilities: <access denied>").
    """
    match = _ACS_CONTROL.search(output or "")
    if not match:
        return None
    flags = {}
    for word in match.group(1).split():
        if len(word) > 1 and word[-1] in "+-":
            flags[word[:-1]] = word[-1] == "+"
    return flags


def _acs_text(flags):
    return " ".join("%s%s" % (name, "+" if on else "-") for name, on in flags.items())


def pcie_acs(bus_ids, run_command, lspci, sysfs="/sys"):
    """The ACS Control of the bridges above the GPUs, read with `lspci -vvv -s <bridge>`: (bridges, notes).

    bus_ids: {GPU index: bus id}. bridges: one per bridge above any of them, by address, {"bus_id", "gpus" (the
    indices of the GPUs below it), "acs_ctl" (the flags as lspci writes them; None where the bridge has no ACS
    capability or was not read), "redirect" (ReqRedir+ or CmpltRedir+; None where not read)}. A GPU sysfs has no
    device for, lspci not in PATH, and a bridge lspci cannot read are notes: what was not read is not judged.
    """
    notes, below = [], {}
    absent = []
    for index, bus_id in sorted(bus_ids.items()):
        chain = upstream_bridges(bus_id, sysfs) if bus_id else None
        if chain is None:
            absent.append("GPU %d (%s)" % (index, bus_id))
            continue
        for bridge in chain:
            below.setdefault(bridge, []).append(index)
    if absent:
        notes.append("the PCIe ACS of the bridges above %s was not read: %s has no such device"
                     % (", ".join(absent), os.path.join(sysfs, "bus", "pci", "devices")))
    if below and not lspci:
        notes.append("lspci is not in PATH (pciutils), so the PCIe ACS of the bridges above the GPUs (%s) was not read"
                     % ", ".join(sorted(below)))
    bridges, unread = [], []
    for bridge in sorted(below):
        record = {"bus_id": bridge, "gpus": below[bridge], "acs_ctl": None, "redirect": None}
        bridges.append(record)
        if not lspci:
            continue
        rc, out, err = run_command([lspci, "-vvv", "-s", bridge])
        if rc != 0:
            unread.append("%s (rc %d: %s)" % (bridge, rc, (err or out or "").strip()[-200:]))
            continue
        if "<access denied>" in (out or ""):
            unread.append("%s (its capabilities read <access denied>: lspci needs root)" % bridge)
            continue
        flags = parse_acs_control(out)
        if flags is not None:
            record["acs_ctl"] = _acs_text(flags)
        record["redirect"] = any(flags.get(name) for name in ACS_REDIRECT) if flags else False
    if unread:
        notes.append("lspci -vvv could not read the PCIe ACS of bridge(s) %s; they were not judged" % ", ".join(unread))
    return bridges, notes


def free_gib(path):
    """Free space for the service user at path (or the nearest directory above it that exists), in GiB."""
    while path and not os.path.isdir(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    stats = os.statvfs(path or "/")
    return round(stats.f_bavail * stats.f_frsize / float(1 << 30), 1)
