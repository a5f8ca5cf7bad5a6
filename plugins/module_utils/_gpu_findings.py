# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the GPUs' health readings (_gpu_health) mean for a tensor-parallel load: the preflight's rules.

An error stops the trial before anything stops: the load would fail, hang, or run on a GPU whose results or speed
cannot be trusted. A warning is printed and the trial goes on: the reading costs speed or start time, or is often
benign (a PCIe link drops its generation while idle). An operator may downgrade an error to a warning by its name.
"""

from __future__ import annotations

from ansible_collections.llmops.vllm.plugins.module_utils._gpu_health import ACS_REDIRECT
from ansible_collections.llmops.vllm.plugins.module_utils._gpu_memory import fault_fix

ERROR = "error"
WARNING = "warning"

# The NCCL setting for a node whose GPUs lack P2P goes where both sides of a trial read it, so that the trial compares
# speculative decoding and not NCCL transports.
P2P_FIX = ("set NCCL_P2P_DISABLE=1 for the node, on both sides alike: in vllm_environment, which the baseline and "
           "every variant share, not in one variant's environment, so that the trial does not compare NCCL transports")

# NVIDIA's NCCL troubleshooting guide (docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html,
# "PCI Access Control Services (ACS)"): ACS on the PCI bridges redirects peer-to-peer traffic to the CPU root complex,
# "causing a significant performance reduction or even a hang"; it is disabled in the BIOS or, per bridge, with setpci
# at every boot.
ACS_FIX = ("disable ACS on those bridges: in the BIOS (its ACS setting, or IO virtualization / VT-d / IOMMU), or at "
           "every boot, before the server starts, with setpci -s <bridge> ECAP_ACS+0x6.w=0000 for each bridge named, "
           "as NVIDIA's NCCL troubleshooting guide shows; or " + P2P_FIX)
NVIDIA_MODPROBE = "/usr/bin/nvidia-modprobe"

# name: (severity, what it means, the fix)
RULES = {
    "gpu_fault": (
        ERROR, "the GPU is faulted: NVML answers with an error instead of its readings, and CUDA will fail on it",
        "reset the GPU with nothing running on it (nvidia-smi -r -i <index>) where the board supports a reset, "
        "else reboot the node"),
    "row_remap_pending": (
        ERROR, "a memory row remap is pending: the faulty row stays in use until the GPU is reset",
        "reset the GPU (nvidia-smi -r -i <index>, with nothing running on it) or reboot the node"),
    "row_remap_failed": (
        ERROR, "a memory row remap failed: the GPU has no spare rows left for a faulty one",
        "take the GPU out of service and have it replaced"),
    "retired_pages_pending": (
        ERROR, "memory pages are pending retirement: they stay in use until the GPU is reset",
        "reset the GPU (nvidia-smi -r -i <index>) or reboot the node"),
    "ecc_volatile_uncorrected": (
        ERROR, "uncorrected ECC errors since the driver loaded: what the GPU computes may be corrupt",
        "reset the GPU or reboot; if they come back, have the GPU replaced"),
    "ecc_aggregate_uncorrected": (
        WARNING, "uncorrected ECC errors in the GPU's lifetime",
        "watch the count; a rising count calls for replacing the GPU"),
    "ecc_disabled": (
        WARNING, "ECC is off on a GPU that supports it: a flipped bit in its memory goes unnoticed and uncorrected",
        "enable it (nvidia-smi -e 1 -i <index>) and reset the GPU or reboot; it costs a little memory and bandwidth"),
    "xid_fallen_off_bus": (
        ERROR, "the kernel log since boot has Xid 79: the GPU fell off the PCIe bus",
        "reboot the node; if it happens again, check the GPU's seating, riser, power cabling and temperatures"),
    "xid_double_bit_ecc": (
        ERROR, "the kernel log since boot has Xid 48: an uncorrectable double-bit ECC error in the GPU's memory",
        "reset the GPU or reboot the node so that the page is retired or the row remapped; if it comes back, have "
        "the GPU replaced"),
    "pcie_width_below_max": (
        ERROR, "the PCIe link trained narrower than the slot and GPU allow: every all-reduce of a tensor-parallel "
        "decode crosses it",
        "reseat the GPU or its riser, check the slot's lane configuration in the BIOS, then reboot"),
    "pcie_gen_below_max": (
        WARNING, "under load, the PCIe link ran below the highest generation the GPU and the slot allow",
        "check the BIOS's PCIe speed setting, the riser and the slot; nvidia-smi -q -d PCIE shows the link"),
    "throttle_hardware": (
        ERROR, "the clocks are held down by a hardware slowdown (thermal, power brake or an external signal)",
        "check the cooling, power supply and cabling; nvidia-smi -q -d PERFORMANCE names the reason"),
    "throttle_software": (
        WARNING, "the clocks are held down by the driver (power cap or software thermal slowdown)",
        "check the power limit and temperatures (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE)"),
    "power_limit_below_default": (
        WARNING, "the power limit is set below the GPU's default",
        "restore it (nvidia-smi -pl <watts> -i <index>) unless it was lowered on purpose"),
    "persistence_off": (
        WARNING, "persistence mode is off: the driver tears the GPU down whenever no process holds it, which "
        "adds to every start and resets its settings",
        "enable it: systemctl enable --now nvidia-persistenced (or nvidia-smi -pm 1)"),
    "p2p_unsupported": (
        WARNING, "peer-to-peer is not supported between these GPUs: NCCL copies through host memory", P2P_FIX),
    "p2p_unreadable": (
        WARNING, "the peer-to-peer matrix between the selected GPUs could not be read, so whether NCCL can use P2P "
        "was not judged",
        "read it by hand (nvidia-smi topo -p2p r); where a pair is not OK, " + P2P_FIX),
    "p2p_iommu_translating": (
        WARNING, "peer-to-peer is reported supported while the IOMMU translates the GPUs' DMA, the combination "
        "reported to hang tensor-parallel loads on PCIe-only nodes",
        "boot with the IOMMU in passthrough (iommu=pt), or " + P2P_FIX),
    "pcie_acs_redirect": (
        WARNING, "ACS redirection on a PCIe bridge between GPUs that report P2P OK sends their peer-to-peer traffic up "
        "to the root complex: NCCL's P2P runs slow or hangs, as NVIDIA's NCCL troubleshooting guide warns", ACS_FIX),
    "nvidia_uvm_missing": (
        ERROR, "CUDA's first use loads nvidia_uvm and creates /dev/nvidia-uvm through the setuid " + NVIDIA_MODPROBE
        + "; with neither, the server cannot initialise CUDA",
        "install the driver's nvidia-modprobe at " + NVIDIA_MODPROBE + " (the vllm_service unit then runs it as root "
        "before the server), or load nvidia_uvm at boot from a unit that runs as root: modprobe nvidia-uvm, then "
        "nvidia-modprobe -u -c=0"),
    "cuda_driver_too_old": (
        ERROR, "the driver supports an older CUDA major version than the target venv's torch was built for (or, "
        "before CUDA 11.1, an older minor one): CUDA will not initialise. Within one major version from 11.1 on, "
        "CUDA's minor version compatibility lets a build for 12.9 run on a driver for 12.8, short of features that "
        "need the newer driver and of PTX that only the newer driver can JIT-compile",
        "upgrade the NVIDIA driver, or install a torch (and vLLM) built for the driver's CUDA major version"),
    "gpu_count_below_world_size": (
        ERROR, "fewer GPUs are selected than tensor_parallel_size x pipeline_parallel_size needs: the engine "
        "cannot start its workers",
        "select (or install) as many GPUs as the variant's world size, or lower its tensor or pipeline parallel size"),
    "compile_cache_disk_low": (
        ERROR, "too little free disk where vLLM keeps its compile cache and the model's staging",
        "free space there, or lower vllm_switch_preflight_min_free_gib if the caches are already warm"),
}
RULE_NAMES = tuple(sorted(RULES))
HARDWARE_THROTTLE = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
SOFTWARE_THROTTLE = ("sw_power_cap", "sw_thermal_slowdown")
P2P_DISABLED = ("1", "true", "yes")
# Xid codes that are findings; any other Xid in the kernel log is a note.
XID_RULES = {79: "xid_fallen_off_bus", 48: "xid_double_bit_ecc"}
# CUDA's minor version compatibility starts with 11.1.
MINOR_COMPATIBLE_FROM = (11, 1)


def unknown_rules(names):
    """The names in a downgrade list that are no rule: a mistyped name must not silently keep an error."""
    return [name for name in names or () if name not in RULES]


def _version(text):
    try:
        return tuple(int(part) for part in str(text).split(".")[:2])
    except ValueError:
        return None


def cuda_compatible(driver, torch):
    """(runs, note) for a torch built for CUDA torch on a driver that supports CUDA driver, both "major.minor".

    The rule: a lower driver major fails; within one major, from CUDA 11.1 on, any driver minor runs a build for a
    newer minor (CUDA's minor version compatibility), with a note, since features that need the newer driver and PTX
    that only it can JIT-compile still fail; before 11.1 the driver's minor must be as new. None when unknown.
    """
    driver, torch = _version(driver), _version(torch)
    if not driver or not torch or driver >= torch:
        return (None if not driver or not torch else True), None
    if driver[0] < torch[0] or driver < MINOR_COMPATIBLE_FROM:
        return False, None
    return True, ("the venv's torch was built for CUDA %d.%d and the driver supports %d.%d: it runs through CUDA's "
                  "minor version compatibility, except for features that need a newer driver and for PTX that only "
                  "a newer driver can JIT-compile" % (torch + driver))


def _pairs(pairs):
    return ", ".join("%d-%d" % pair for pair in pairs)


class _Findings:
    def __init__(self, downgrade):
        self.downgrade = set(downgrade or ())
        self.found = []

    def add(self, rule, gpu, reading, fix=None):
        severity, meaning, default_fix = RULES[rule]
        fix = fix or default_fix
        if gpu is not None:
            fix = fix.replace("<index>", str(gpu))
        downgraded = severity == ERROR and rule in self.downgrade
        where = "GPU %d" % gpu if gpu is not None else "node"
        note = "; downgraded to a warning" if downgraded else ""
        self.found.append({
            "rule": rule,
            "severity": WARNING if downgraded else severity,
            "downgraded": downgraded,
            "gpu": gpu,
            "reading": reading,
            "fix": fix,
            "message": "%s: %s (%s)%s. Fix: %s." % (where, reading, meaning, note, fix),
        })


def _gpu_findings(findings, gpu, gen_under_load):
    index = gpu["index"]
    if gpu.get("fault"):
        # A faulted GPU gives no other reading worth judging.
        findings.add("gpu_fault", index, "the GPU reads [%s]" % gpu["fault"],
                     fault_fix(gpu["fault"], gpu.get("name"), index))
        return
    if gpu.get("remap_pending"):
        findings.add("row_remap_pending", index, "remapped_rows.pending is Yes")
    if gpu.get("remap_failed"):
        findings.add("row_remap_failed", index, "remapped_rows.failure is Yes")
    if gpu.get("retired_pages_pending"):
        findings.add("retired_pages_pending", index, "retired_pages.pending is Yes")
    if gpu.get("ecc_volatile_uncorrected"):
        findings.add("ecc_volatile_uncorrected", index,
                     "%d uncorrected volatile ECC errors" % gpu["ecc_volatile_uncorrected"])
    if gpu.get("ecc_aggregate_uncorrected"):
        findings.add("ecc_aggregate_uncorrected", index,
                     "%d uncorrected aggregate ECC errors" % gpu["ecc_aggregate_uncorrected"])
    # [N/A] (None) where the board has no ECC, as GeForce boards; Disabled where it has ECC and it is off.
    if gpu.get("ecc_mode") is False:
        findings.add("ecc_disabled", index, "ecc.mode.current is Disabled")
    width, width_max = gpu.get("pcie_width"), gpu.get("pcie_width_max")
    if width and width_max and width < width_max:
        findings.add("pcie_width_below_max", index, "PCIe link x%d of x%d" % (width, width_max))
    # Only a generation read under load is judged (_pcie_links): an idle GPU trains its link down (gen 1 of 5 at P8)
    # without always setting the gpu_idle reason.
    generation, generation_max = gen_under_load.get(index), gpu.get("pcie_gen_max")
    if generation and generation_max and generation < generation_max:
        findings.add("pcie_gen_below_max", index, "PCIe generation %d of %d under load" % (generation, generation_max))
    reasons = gpu.get("throttle_reasons") or []
    hardware = [reason for reason in reasons if reason in HARDWARE_THROTTLE]
    software = [reason for reason in reasons if reason in SOFTWARE_THROTTLE]
    if hardware:
        findings.add("throttle_hardware", index, "clocks held down by %s" % ", ".join(hardware))
    if software:
        findings.add("throttle_software", index, "clocks held down by %s" % ", ".join(software))
    limit, default_limit = gpu.get("power_limit_w"), gpu.get("power_default_limit_w")
    if limit and default_limit and limit < default_limit - 1:
        findings.add("power_limit_below_default", index, "power limit %g W of a default %g W" % (limit, default_limit))
    if gpu.get("persistence_mode") is False:
        findings.add("persistence_off", index, "persistence mode Disabled")


def _p2p_findings(findings, node, selected, environment):
    """The P2P matrix's findings between the selected GPUs that are not faulted, and the NCCL settings that fit it.

    A matrix that was asked for but not read (None), or that lacks a pair, is p2p_unreadable: never a silent pass.
    """
    if "p2p" not in node or len(selected) < 2:
        return None
    matrix = node.get("p2p")
    pairs = [(first, second) for first in selected for second in selected if first < second]
    # Where NCCL already leaves P2P alone, what the matrix says does not matter.
    disabled = str((environment or {}).get("NCCL_P2P_DISABLE", "")).strip().lower() in P2P_DISABLED
    if matrix is None:
        if not disabled:
            findings.add("p2p_unreadable", None, "nvidia-smi topo -p2p r gave no matrix%s"
                         % (": %s" % node["p2p_error"] if node.get("p2p_error") else ""))
        return {}
    missing = [pair for pair in pairs if pair not in matrix]
    broken = [(pair, matrix[pair]) for pair in pairs if pair in matrix and matrix[pair] != "OK"]
    # The NCCL settings that fit the matrix: P2P off where any pair of the ranks cannot use it.
    settings = {"NCCL_P2P_DISABLE": "1"} if broken else {}
    if disabled:
        return settings
    if missing:
        findings.add("p2p_unreadable", None, "no P2P status read between GPUs %s" % _pairs(missing))
    if broken:
        statuses = sorted(set(status for _pair, status in broken))
        findings.add("p2p_unsupported", None, "P2P %s between GPUs %s" % (
            "/".join(statuses), _pairs([pair for pair, _status in broken])))
    elif not missing and (node.get("iommu") or {}).get("translating"):
        findings.add("p2p_iommu_translating", None, "P2P OK while the IOMMU translates DMA for %s"
                     % ", ".join(node["iommu"]["translating"]))
    return settings


def _acs_findings(findings, node, selected, environment):
    """pcie_acs_redirect: a bridge with ReqRedir+ or CmpltRedir+ on the path between two selected GPUs reported P2P OK.

    A bridge is on the path between two GPUs when exactly one of them is below it: the traffic enters the fabric there
    (a switch's downstream port, or the root port where the two GPUs' branches meet at the root complex). Not judged
    where NCCL already leaves P2P alone, nor for a pair whose P2P is not OK (p2p_unsupported) or a bridge not read.
    """
    matrix = node.get("p2p") or {}
    if str((environment or {}).get("NCCL_P2P_DISABLE", "")).strip().lower() in P2P_DISABLED:
        return
    working = [(first, second) for first in selected for second in selected
               if first < second and matrix.get((first, second)) == "OK"]
    found, crossed = [], set()
    for bridge in node.get("pcie_acs") or ():
        below = [index for index in bridge.get("gpus") or () if index in selected]
        pairs = [pair for pair in working if (pair[0] in below) != (pair[1] in below)]
        if bridge.get("redirect") and pairs:
            flags = [flag for flag in bridge["acs_ctl"].split() if flag[:-1] in ACS_REDIRECT and flag.endswith("+")]
            found.append((bridge["bus_id"], below, flags))
            crossed.update(pairs)
    if found:
        bridges = "; ".join("%s on bridge %s above GPU %s" % (" ".join(flags), bus_id, ",".join(map(str, below)))
                            for bus_id, below, flags in found)
        reading = "ACSCtl %s, on the path between GPUs %s, reported P2P OK" % (bridges, _pairs(sorted(crossed)))
        fix = ACS_FIX.replace("for each bridge named", "for each of %s" % ", ".join(bus_id for bus_id, _b, _f in found))
        findings.add("pcie_acs_redirect", None, reading, fix)


def nvidia_uvm_verdict(state):
    """What /dev/nvidia-uvm's absence means: "error", "note" or None.

    Judged only on a node with the driver's device nodes (/dev/nvidiactl or /dev/nvidia0); the mock host has none.
    CUDA's first use loads nvidia_uvm and creates /dev/nvidia-uvm through the setuid nvidia-modprobe, which the unit's
    sandbox (NoNewPrivileges=) defeats, so the vllm_service unit runs /usr/bin/nvidia-modprobe -u -c=0 as root before
    the server (ExecStartPre=+) where the node has it. Missing, with no executable /usr/bin/nvidia-modprobe: the
    server cannot initialise CUDA, an error (nvidia_uvm_missing). Missing, with it: the unit creates it, a note.
    """
    state = state or {}
    if not state.get("nvidia_devices") or state.get("uvm"):
        return None
    return "note" if state.get("nvidia_modprobe") else "error"


def nvidia_uvm_notes(state):
    """The note for a /dev/nvidia-uvm the unit will create (nvidia_uvm_verdict), else none."""
    if nvidia_uvm_verdict(state) != "note":
        return []
    return ["/dev/nvidia-uvm does not exist yet; the vllm_service unit creates it before the server starts "
            "(ExecStartPre=+%s -u -c=0)" % NVIDIA_MODPROBE]


def _xid_findings(findings, node, selected):
    """Xid 79 and 48 in the kernel log since boot, on a selected GPU or on a bus no GPU answered for."""
    for event in node.get("xid_events") or ():
        rule = XID_RULES.get(event["xid"])
        if rule and (event["gpu"] is None or event["gpu"] in selected):
            where = "" if event["gpu"] is not None else " (PCI %s, no GPU read there)" % event["bus_id"]
            findings.add(rule, event["gpu"], "%d Xid %d event(s) since boot%s: %s"
                         % (event["count"], event["xid"], where, event["message"]))


def xid_notes(events, selected=None):
    """One note per Xid event kind that is no finding (XID_RULES), on a selected GPU or on an unknown bus."""
    return ["%d Xid %d event(s) since boot on %s: %s" % (
        event["count"], event["xid"], "GPU %d" % event["gpu"] if event["gpu"] is not None else "PCI " + event["bus_id"],
        event["message"]) for event in events or ()
        if event["xid"] not in XID_RULES and (selected is None or event["gpu"] is None or event["gpu"] in selected)]


def _pcie_generations(value):
    """{gpu index: generation} from a mapping whose keys may be text (as Ansible passes them)."""
    return dict((int(index), int(generation)) for index, generation in (value or {}).items() if generation)


def assess(gpus, node, selected=None, environment=None, min_free_gib=None, downgrade=(), pcie_gen_under_load=None,
           world_size=None):
    """(findings, nccl_settings) for the selected GPUs (all when None) and the node's readings.

    node: driver's cuda_driver_version, the venv's torch_cuda, p2p {(a, b): status} (None when asked and not read),
    p2p_error, iommu (_gpu_health.iommu_state), pcie_acs (_gpu_health.pcie_acs's bridges), nvidia_uvm
    (_gpu_health.nvidia_uvm_state), xid_events (_gpu_health.parse_xids), free_gib at cache_dir.
    environment: the target's, where NCCL_P2P_DISABLE may already be set. pcie_gen_under_load: {gpu index: the
    PCIe generation read under load} (_pcie_links.generations_to_judge); a GPU not in it is not judged. world_size:
    the GPUs the engine needs (tensor_parallel_size x pipeline_parallel_size).
    """
    findings = _Findings(downgrade)
    chosen = [gpu for gpu in gpus if selected is None or gpu["index"] in selected]
    gen_under_load = _pcie_generations(pcie_gen_under_load)
    for gpu in chosen:
        _gpu_findings(findings, gpu, gen_under_load)
    indices = [gpu["index"] for gpu in chosen]
    working = [gpu["index"] for gpu in chosen if not gpu.get("fault")]
    settings = _p2p_findings(findings, node, working, environment) or {}
    _acs_findings(findings, node, working, environment)
    _xid_findings(findings, node, indices)
    if nvidia_uvm_verdict(node.get("nvidia_uvm")) == "error":
        findings.add("nvidia_uvm_missing", None, "/dev/nvidia-uvm does not exist and %s is not executable"
                     % NVIDIA_MODPROBE)
    runs, _note = cuda_compatible(node.get("cuda_driver_version"), node.get("torch_cuda"))
    if runs is False:
        findings.add("cuda_driver_too_old", None, "driver CUDA %s, the venv's torch built for CUDA %s"
                     % (node["cuda_driver_version"], node["torch_cuda"]))
    if world_size and len(chosen) < world_size:
        findings.add("gpu_count_below_world_size", None, "%d GPU(s) selected (%s) for a world size of %d"
                     % (len(chosen), ",".join(map(str, indices)) or "none", world_size))
    free = node.get("free_gib")
    if free is not None and min_free_gib and free < min_free_gib:
        findings.add("compile_cache_disk_low", None, "%g GiB free at %s, %g GiB wanted"
                     % (free, node.get("cache_dir"), min_free_gib))
    return findings.found, settings
