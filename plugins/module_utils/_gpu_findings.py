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

ERROR = "error"
WARNING = "warning"

# name: (severity, what it means, the fix)
RULES = {
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
    "pcie_width_below_max": (
        ERROR, "the PCIe link trained narrower than the slot and GPU allow: every all-reduce of a tensor-parallel "
        "decode crosses it",
        "reseat the GPU or its riser, check the slot's lane configuration in the BIOS, then reboot"),
    "pcie_gen_below_max": (
        WARNING, "the PCIe link of a GPU that is not idle runs below its maximum generation",
        "read it again under load (nvidia-smi -q -d PCIE); if it stays low, check the BIOS's PCIe speed setting "
        "and the riser"),
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
        WARNING, "peer-to-peer is not supported between these GPUs: NCCL copies through host memory",
        "set NCCL_P2P_DISABLE=1 in the variant's environment, so that NCCL does not probe a path it cannot use"),
    "p2p_iommu_translating": (
        WARNING, "peer-to-peer is reported supported while the IOMMU translates the GPUs' DMA, the combination "
        "reported to hang tensor-parallel loads on PCIe-only nodes",
        "boot with the IOMMU in passthrough (iommu=pt), or set NCCL_P2P_DISABLE=1 in the variant's environment"),
    "cuda_driver_too_old": (
        ERROR, "the driver supports an older CUDA than the target venv's torch was built for: CUDA will not "
        "initialise",
        "upgrade the NVIDIA driver, or install a torch (and vLLM) built for the driver's CUDA"),
    "compile_cache_disk_low": (
        ERROR, "too little free disk where vLLM keeps its compile cache and the model's staging",
        "free space there, or lower vllm_switch_preflight_min_free_gib if the caches are already warm"),
}
RULE_NAMES = tuple(sorted(RULES))
HARDWARE_THROTTLE = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
SOFTWARE_THROTTLE = ("sw_power_cap", "sw_thermal_slowdown")
P2P_DISABLED = ("1", "true", "yes")


def unknown_rules(names):
    """The names in a downgrade list that are no rule: a mistyped name must not silently keep an error."""
    return [name for name in names or () if name not in RULES]


def _version(text):
    try:
        return tuple(int(part) for part in str(text).split(".")[:2])
    except ValueError:
        return None


def _pairs(pairs):
    return ", ".join("%d-%d" % pair for pair in pairs)


class _Findings:
    def __init__(self, downgrade):
        self.downgrade = set(downgrade or ())
        self.found = []

    def add(self, rule, gpu, reading):
        severity, meaning, fix = RULES[rule]
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


def _gpu_findings(findings, gpu):
    index = gpu["index"]
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
    width, width_max = gpu.get("pcie_width"), gpu.get("pcie_width_max")
    if width and width_max and width < width_max:
        findings.add("pcie_width_below_max", index, "PCIe link x%d of x%d" % (width, width_max))
    generation, generation_max = gpu.get("pcie_gen"), gpu.get("pcie_gen_max")
    # An idle GPU lowers its link's generation to save power; only a busy one's is worth a warning.
    idle = "gpu_idle" in (gpu.get("throttle_reasons") or [])
    if generation and generation_max and generation < generation_max and not idle:
        findings.add("pcie_gen_below_max", index, "PCIe generation %d of %d" % (generation, generation_max))
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
    matrix = node.get("p2p")
    if not matrix or len(selected) < 2:
        return None
    pairs = [(first, second) for first in selected for second in selected if first < second]
    broken = [(pair, matrix.get(pair, "U")) for pair in pairs if matrix.get(pair, "U") != "OK"]
    disabled = str((environment or {}).get("NCCL_P2P_DISABLE", "")).strip().lower() in P2P_DISABLED
    # The NCCL settings that fit the matrix: P2P off where any pair of the ranks cannot use it.
    settings = {"NCCL_P2P_DISABLE": "1"} if broken else {}
    if disabled:
        return settings
    if broken:
        statuses = sorted(set(status for _pair, status in broken))
        findings.add("p2p_unsupported", None, "P2P %s between GPUs %s" % (
            "/".join(statuses), _pairs([pair for pair, _status in broken])))
    elif (node.get("iommu") or {}).get("translating"):
        findings.add("p2p_iommu_translating", None, "P2P OK while the IOMMU translates DMA for %s"
                     % ", ".join(node["iommu"]["translating"]))
    return settings


def assess(gpus, node, selected=None, environment=None, min_free_gib=None, downgrade=()):
    """(findings, nccl_settings) for the selected GPUs (all when None) and the node's readings.

    node: driver's cuda_driver_version, the venv's torch_cuda, p2p {(a, b): status}, iommu (_gpu_health.iommu_state),
    free_gib at cache_dir. environment: the target's, where NCCL_P2P_DISABLE may already be set.
    """
    findings = _Findings(downgrade)
    chosen = [gpu for gpu in gpus if selected is None or gpu["index"] in selected]
    for gpu in chosen:
        _gpu_findings(findings, gpu)
    settings = _p2p_findings(findings, node, [gpu["index"] for gpu in chosen], environment) or {}
    driver, torch = _version(node.get("cuda_driver_version")), _version(node.get("torch_cuda"))
    if driver and torch and driver < torch:
        findings.add("cuda_driver_too_old", None, "driver CUDA %s, the venv's torch built for CUDA %s"
                     % (node["cuda_driver_version"], node["torch_cuda"]))
    free = node.get("free_gib")
    if free is not None and min_free_gib and free < min_free_gib:
        findings.add("compile_cache_disk_low", None, "%g GiB free at %s, %g GiB wanted"
                     % (free, node.get("cache_dir"), min_free_gib))
    return findings.found, settings
