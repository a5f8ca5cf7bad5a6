#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_preflight
short_description: Read the GPUs' health before a long load and say what would make it fail, hang or run slow
version_added: 1.1.0
description:
  - Reads, without changing anything, what a tensor-parallel vLLM load on the node depends on, one row per GPU
    and node-wide, and judges each reading by a documented rule as an error or a warning.
  - Per GPU, whether it is faulted, persistence mode, the ECC mode and uncorrected ECC errors (volatile and
    aggregate), retired pages pending, row remaps pending or failed, SM clocks and throttle reasons, the power limit
    against its default, and the PCIe link's width against its maximum (its generation only as read under load, see
    O(pcie_record)).
  - For the node, the driver's CUDA version against the CUDA the target venv's torch was built for, the
    peer-to-peer matrix between the selected GPUs and the NCCL settings that fit it, the IOMMU's mode for the
    GPUs, the PCIe Access Control Services (ACS) of the bridges above them, whether C(/dev/nvidia-uvm) exists or can
    be created, the Xid events in the kernel log since boot, the GPU count against O(world_size), and the free disk
    where vLLM keeps its compile cache.
  - The ACS of the bridges above each selected GPU is read from its sysfs path
    (C(/sys/bus/pci/devices/<bus id>), resolved, names every bridge above it) and the C(ACSCtl) line of
    C(lspci -vvv -s <bridge>), which needs root, as the module runs under C(become). A GPU sysfs has no device for
    (as on the mock host), C(lspci) not in C(PATH), and a bridge C(lspci) cannot read are notes, not findings.
  - C(/dev/nvidia-uvm) is judged only on a node with the driver's device nodes (C(/dev/nvidiactl) or
    C(/dev/nvidia0)). CUDA's first use creates it, and loads C(nvidia_uvm), through the setuid
    C(/usr/bin/nvidia-modprobe); the vllm_service unit runs C(nvidia-modprobe -u -c=0) as root before the server
    where the node has that program. Missing with that program is a note, since the unit creates it.
  - Reads through NVML when the C(pynvml) Python module (from C(nvidia-ml-py)) imports and initialises,
    else through C(nvidia-smi --query-gpu), C(--query-remapped-rows), C(topo -p2p r) (its header's underline escape
    codes removed) and C(nvidia-smi)'s summary. Both give the same rows and the same findings.
  - A GPU is faulted where nvidia-smi writes V([GPU requires reset]), V([GPU is lost]) or V([Unknown Error]) in
    place of a reading, or cannot open it (C(Unable to determine the device handle for GPU...)), and where NVML
    raises C(NVMLError_ResetRequired), C(NVMLError_GpuIsLost) or C(NVMLError_Unknown). Other bracketed values
    (V([N/A]), V([Not Supported]), V([Insufficient Permissions])) are readings the GPU does not give, V(null).
  - The module fails only when nothing could be read. What the readings mean is in RV(findings) and RV(passed);
    the caller stops on an error. Warnings are also printed as Ansible warnings.
  - "Rules and their severity: an B(error) for V(gpu_fault), V(row_remap_pending), V(row_remap_failed),
    V(retired_pages_pending), V(ecc_volatile_uncorrected), V(xid_fallen_off_bus) (Xid 79),
    V(xid_double_bit_ecc) (Xid 48), V(pcie_width_below_max), V(throttle_hardware), V(cuda_driver_too_old),
    V(gpu_count_below_world_size), V(compile_cache_disk_low) and V(nvidia_uvm_missing) (no C(/dev/nvidia-uvm) and no
    executable C(/usr/bin/nvidia-modprobe) to create it); a B(warning) for V(ecc_aggregate_uncorrected),
    V(ecc_disabled), V(pcie_gen_below_max), V(throttle_software), V(power_limit_below_default),
    V(persistence_off), V(p2p_unsupported), V(p2p_unreadable), V(p2p_iommu_translating) and V(pcie_acs_redirect)
    (C(ReqRedir+) or C(CmpltRedir+) in the C(ACSCtl) of a bridge on the path between selected GPUs reported P2P OK).
    Any other Xid is a note."
  - "V(cuda_driver_too_old) follows CUDA's minor version compatibility: a driver of a lower CUDA major version than
    torch's fails; within one major version, from CUDA 11.1 on, a driver for 12.8 runs a torch built for 12.9, with
    a note, since features that need the newer driver and PTX that only the newer driver can JIT-compile still fail."
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads, and keeps what it read under load in O(pcie_record) unless
      O(update_pcie_record=false).
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  gpus:
    description:
      - Indices of the GPUs the load will use, as C(nvidia-smi) numbers them. All GPUs when not set.
      - The peer-to-peer matrix is judged between these GPUs only.
    type: list
    elements: int
  environment:
    description:
      - The environment the target runs with. A matrix that does not support peer-to-peer is not reported where
        it already sets C(NCCL_P2P_DISABLE=1).
    type: dict
    default: {}
  torch_python:
    description:
      - The Python of the target's venv. Its torch's CUDA version, read from torch's C(version.py) in that venv
        (or, where that file is not found, from the Python itself), is compared with the driver's. Not compared
        when not set, or when that torch has no CUDA build.
    type: path
  cache_dir:
    description:
      - Where vLLM keeps its compile cache (the service user's home). Its free disk is judged against
        O(min_free_gib); the nearest directory above it that exists when it does not exist yet.
    type: path
  min_free_gib:
    description: Free disk in GiB wanted at O(cache_dir). V(0) does not judge it.
    type: float
    default: 20
  downgrade:
    description:
      - Rules whose errors count as warnings on this node, by name (see the description). An unknown name is
        refused, so that a mistyped one does not silently keep the error.
    type: list
    elements: str
    default: []
  pcie_gen_under_load:
    description:
      - "The PCIe link generation each GPU was seen at under load, by GPU index, such as V({0: 5, 1: 4}), from
        C(nvidia-smi --query-gpu=index,pcie.link.gen.current,pstate) read while the GPUs serve. Judged in place of
        what the preflight reads or keeps for those GPUs."
      - A GPU's generation below its C(pcie.link.gen.max) (what the GPU and the slot both allow) is
        V(pcie_gen_below_max).
    type: dict
    default: {}
  pcie_record:
    description:
      - A file on the node where the preflight keeps the latest PCIe link generation read under load of each GPU
        (by UUID, with its bus id and when it was read), and from which it reads it again.
      - A generation is judged only as read under load, in the performance states P0 to P2, where the driver runs
        the link at the generation it trained to. An idle GPU trains its link down (a Blackwell board at P8 reads
        generation 1 of 5 without always setting the idle reason); a preflight that finds a GPU idle judges the
        latest reading kept for that GPU in that slot, and where there is none, says so in a note.
      - Not kept nor read when not set.
    type: path
  update_pcie_record:
    description:
      - Write what was read under load to O(pcie_record). V(false) only reads it, as in check mode.
      - The file is a record of readings, not of the node's configuration, so writing it does not make the task changed.
    type: bool
    default: true
  world_size:
    description:
      - The GPUs the target's engine needs, C(tensor_parallel_size) times C(pipeline_parallel_size). Fewer selected
        GPUs is V(gpu_count_below_world_size). Not judged when not set.
    type: int
  kernel_log:
    description:
      - Read the kernel log since boot (C(journalctl -k -b -o cat), else C(dmesg)) for the driver's Xid events.
        Xid 79 and 48 on a selected GPU, or on a bus no GPU answered for, are errors; any other Xid is a note.
      - A log that cannot be read is a note.
    type: bool
    default: true
requirements:
  - The NVIDIA driver with C(nvidia-smi), or the C(pynvml) Python module, on the managed host.
seealso:
  - module: llmops.vllm.wait_for_gpu_memory
notes:
  - A PCIe link's generation drops while the GPU is idle, which is why only a generation read under load
    (O(pcie_record)) is judged; a width below its maximum does not recover under load and is an error.
  - The fix of V(p2p_unsupported) sets C(NCCL_P2P_DISABLE=1) for the whole node, in the inventory's
    C(vllm_environment) that the baseline and every variant share, so that a trial does not compare NCCL transports.
  - The fix of V(pcie_acs_redirect) follows NVIDIA's NCCL troubleshooting guide (PCI Access Control Services). It
    disables ACS in the BIOS, or on the bridges named with C(setpci -s <bridge> ECAP_ACS+0x6.w=0000) at every boot;
    or it sets C(NCCL_P2P_DISABLE=1) for the node, as for V(p2p_unsupported). Neither V(p2p_unsupported) nor
    V(pcie_acs_redirect) is reported where the target's environment already sets C(NCCL_P2P_DISABLE=1).
  - The fix of V(gpu_fault) depends on the board. C(nvidia-smi -r) is not supported on GeForce, TITAN, Quadro and
    workstation boards, such as the RTX PRO 6000 Blackwell Workstation Edition, so the fix is a reboot there; a
    data-center board (H100, A100, L40S, a Server Edition, ...) is reset with C(nvidia-smi -r -i <index>) or the node
    rebooted; the fix for a board known neither way names both. A GPU that is lost (fallen off the bus) needs a
    reboot on any board.
"""

EXAMPLES = r"""
- name: Check the eight GPUs before loading the model
  llmops.vllm.gpu_preflight:
    gpus: [0, 1, 2, 3, 4, 5, 6, 7]
    torch_python: /opt/vllm/0.11.0/bin/python
    cache_dir: /var/lib/vllm
  register: preflight

- name: Stop on an error, naming the GPU, the reading and the fix
  ansible.builtin.fail:
    msg: "{{ preflight.errors }}"
  when: not preflight.passed

- name: Accept a link known to train at x8 on this node's risers
  llmops.vllm.gpu_preflight:
    downgrade: [pcie_width_below_max]

- name: Judge each GPU's PCIe generation as read under load, now or by an earlier preflight
  llmops.vllm.gpu_preflight:
    pcie_record: /var/lib/vllm-switch/gpu-pcie-links.json

- name: Check that eight GPUs serve a TP 8 engine, judging the PCIe generations seen while they served
  llmops.vllm.gpu_preflight:
    world_size: 8
    pcie_gen_under_load: {0: 5, 1: 5, 2: 5, 3: 5, 4: 5, 5: 5, 6: 5, 7: 4}
"""

RETURN = r"""
passed:
  description: Whether no finding is an error.
  returned: success
  type: bool
  sample: false
errors:
  description: The messages of the findings that are errors.
  returned: success
  type: list
  elements: str
  sample: ["GPU 3: remapped_rows.pending is Yes (a memory row remap is pending ...). Fix: reset the GPU ..."]
warnings_found:
  description: The messages of the findings that are warnings.
  returned: success
  type: list
  elements: str
  sample: ["GPU 7: PCIe generation 4 of 5 under load (...). Fix: check the BIOS's PCIe speed setting, ..."]
findings:
  description: Every finding, errors first.
  returned: success
  type: list
  elements: dict
  contains:
    rule:
      description: The rule's name, as O(downgrade) takes it.
      type: str
      sample: row_remap_pending
    severity:
      description: V(error) or V(warning), after O(downgrade).
      type: str
      sample: error
    downgraded:
      description: Whether O(downgrade) made an error a warning.
      type: bool
      sample: false
    gpu:
      description: The GPU's index; V(null) for a node-wide finding.
      type: int
      sample: 3
    reading:
      description: What was read.
      type: str
      sample: PCIe link x4 of x16
    fix:
      description: What to do about it.
      type: str
      sample: reseat the GPU or its riser
    message:
      description: The whole finding in a sentence.
      type: str
      sample: "GPU 3: PCIe link x4 of x16 (...). Fix: reseat the GPU or its riser ..."
nccl_settings:
  description: The NCCL environment that fits the peer-to-peer matrix between the selected GPUs; empty when
    every pair supports it.
  returned: success
  type: dict
  sample: {NCCL_P2P_DISABLE: "1"}
gpus:
  description: One row of readings per selected GPU; a reading the GPU does not report is V(null).
  returned: success
  type: list
  elements: dict
  sample:
    - index: 0
      name: NVIDIA RTX PRO 6000 Blackwell Server Edition
      fault: null
      persistence_mode: true
      ecc_mode: true
      ecc_volatile_uncorrected: 0
      remap_pending: false
      pcie_gen: 1
      pcie_gen_max: 5
      pcie_width: 16
      pcie_width_max: 16
      pstate: P8
      throttle_reasons: [gpu_idle]
    - index: 1
      name: NVIDIA RTX PRO 6000 Blackwell Server Edition
      fault: GPU requires reset
      persistence_mode: null
  contains:
    fault:
      description: V(GPU requires reset), V(GPU is lost) or V(Unknown Error) for a faulted GPU, whose other readings
        are then V(null); V(null) for a GPU that reads.
      type: str
    ecc_mode:
      description: Whether ECC is on (C(ecc.mode.current)); V(null) on a board without ECC.
      type: bool
    pstate:
      description: The performance state, V(P0) (highest) to V(P15); V(null) where it is not read.
      type: str
pcie_gen_under_load:
  description:
    - The PCIe link generation judged for each selected GPU, by index, and where it was read (now in P0 to P2, on an
      earlier preflight kept in O(pcie_record), or given in O(pcie_gen_under_load)). A GPU without one is not here.
  returned: success
  type: dict
  sample:
    "0": {generation: 5, generation_max: 5, read: read at P1 on 2026-12-07T21:40:05Z}
    "7": {generation: 4, generation_max: 5, read: read now, at P0}
node:
  description: The node's readings, the driver's and torch's CUDA versions, the P2P matrix as C(a-b) keys (with
    C(p2p_error), what C(nvidia-smi topo -p2p r) said when it gave no matrix), the IOMMU's mode, the ACS of the
    bridges above the selected GPUs, the device nodes CUDA needs, the Xid events in the kernel log since boot and the
    free disk.
  returned: success
  type: dict
  contains:
    pcie_acs:
      description:
        - One entry per PCI bridge above the selected GPUs that are not faulted, by address; empty with fewer than
          two such GPUs, or where sysfs has none of them.
        - C(gpus), the indices of the selected GPUs below it; C(acs_ctl), its C(ACSCtl) flags as C(lspci -vvv)
          writes them, V(null) where the bridge has no ACS capability or was not read; C(redirect), whether
          C(ReqRedir+) or C(CmpltRedir+) is set, V(null) where it was not read.
      type: list
      elements: dict
    nvidia_uvm:
      description:
        - C(nvidia_devices), whether C(/dev/nvidiactl) or C(/dev/nvidia0) exists; C(uvm), whether
          C(/dev/nvidia-uvm) exists; C(nvidia_modprobe), whether C(/usr/bin/nvidia-modprobe) is executable.
      type: dict
  sample:
    driver_version: 580.95.05
    cuda_driver_version: "13.0"
    torch_cuda: "12.8"
    p2p: {"0-1": OK, "1-0": OK}
    p2p_error: null
    iommu: {enabled: false, translating: []}
    pcie_acs:
      - bus_id: "0000:64:00.0"
        gpus: [0]
        acs_ctl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
        redirect: true
    nvidia_uvm: {nvidia_devices: true, uvm: true, nvidia_modprobe: true}
    xid_events:
      - {xid: 79, bus_id: "0000:2b:00", gpu: 3, count: 1, message: GPU has fallen off the bus.}
    free_gib: 812.4
notes:
  description:
    - Readings this node could not give, and checks skipped for it (the PCIe generation read now, a kernel log that
      could not be read, bridges whose ACS was not read), Xid events that are no finding, a C(/dev/nvidia-uvm) the
      unit will create, and the caveat of a driver older than torch's CUDA within its major version.
  returned: success
  type: list
  elements: str
  sample: ["the PCIe link generation read now was not judged, since a GPU trains its link down while idle (GPU 0 at
    gen 1 of 5 (P8)); it is judged once a preflight reads it in P0 to P2, as while the baseline serves traffic, or
    when given in pcie_gen_under_load"]
source:
  description: Where the GPUs' readings came from.
  returned: always
  type: str
  choices: [nvml, nvidia-smi]
"""

import ast
import glob
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.vllm.plugins.module_utils._gpu_findings import (
    ERROR,
    assess,
    cuda_compatible,
    nvidia_uvm_notes,
    unknown_rules,
    xid_notes,
)
from ansible_collections.llmops.vllm.plugins.module_utils._gpu_health import (
    NvidiaSmiHealth,
    NvmlHealth,
    free_gib,
    iommu_state,
    nvidia_uvm_state,
    parse_xids,
    pcie_acs,
)
from ansible_collections.llmops.vllm.plugins.module_utils._gpu_memory import GpuQueryError, open_reader
from ansible_collections.llmops.vllm.plugins.module_utils._pcie_links import (
    generations_to_judge,
    load_record,
    not_judged_note,
    save_record,
)

TORCH_CUDA = "import json, torch; print(json.dumps(torch.version.cuda))"


def torch_cuda_from_file(python):
    """torch.version.cuda as torch's own version.py in the venv of python writes it, without importing torch.

    Importing torch takes seconds, and initialises CUDA on some builds; the file is written when torch is built.
    Returns (found, version): version is None for a build without CUDA.
    """
    venv = os.path.dirname(os.path.dirname(python))
    for path in sorted(glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "torch", "version.py"))):
        try:
            with open(path, encoding="utf-8") as handle:
                tree = ast.parse(handle.read(), path)
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(
                node, "target", None)
            value = getattr(node, "value", None)
            if isinstance(target, ast.Name) and target.id == "cuda" and isinstance(value, ast.Constant):
                return True, value.value
    return False, None


def torch_cuda(module, python, notes):
    """The CUDA version the venv's torch was built for, or None with a note saying why it is not compared."""
    if not python:
        return None
    found, version = torch_cuda_from_file(python)
    if not found:
        rc, out, err = module.run_command([python, "-c", TORCH_CUDA])
        if rc != 0:
            notes.append("the CUDA version of %s's torch could not be read: %s" % (python, (err or out).strip()[-300:]))
            return None
        version = json.loads(out.strip().splitlines()[-1])
    if version is None:
        notes.append("%s's torch has no CUDA build; the driver's CUDA was not compared with it" % python)
    return version


def kernel_log(module, notes):
    """The kernel's messages since boot (journalctl -k -b, else dmesg), or None with a note saying why not."""
    journalctl = module.get_bin_path("journalctl")
    if journalctl:
        argv = [journalctl, "--dmesg", "--boot", "--output=cat", "--no-pager", "--quiet"]
    else:
        dmesg = module.get_bin_path("dmesg")
        if not dmesg:
            notes.append("neither journalctl nor dmesg is in PATH: Xid events were not read")
            return None
        argv = [dmesg]
    rc, out, err = module.run_command(argv)
    if rc != 0:
        notes.append("the kernel log could not be read, so Xid events were not judged (%s, rc %d): %s"
                     % (" ".join(argv), rc, (err or out).strip()[-300:]))
        return None
    return out


def pcie_generations(module, value):
    """{gpu index: generation} from the pcie_gen_under_load option, whose keys Ansible may pass as text."""
    generations = {}
    for index, generation in (value or {}).items():
        try:
            generations[int(index)] = int(generation)
        except (TypeError, ValueError):
            module.fail_json(msg="pcie_gen_under_load: %r: %r is no GPU index and PCIe generation; give "
                                 "{index: generation}, such as {0: 5}" % (index, generation))
    return generations


def pcie_under_load(module, gpus, given, notes):
    """({index: generation to judge}, {index: where it was read}), keeping what was read under load now."""
    path = module.params["pcie_record"]
    record, note = load_record(path) if path else (None, None)
    if note:
        notes.append(note)
    generations, sources, kept = generations_to_judge(gpus, record, given)
    if path and module.params["update_pcie_record"] and not module.check_mode and kept != record:
        try:
            save_record(path, kept)
        except OSError as exc:
            notes.append("the PCIe links read under load could not be kept in %s (%s)" % (path, exc))
    return generations, sources


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="list", elements="int"),
            environment=dict(type="dict", default={}),
            torch_python=dict(type="path"),
            cache_dir=dict(type="path"),
            min_free_gib=dict(type="float", default=20),
            downgrade=dict(type="list", elements="str", default=[]),
            pcie_gen_under_load=dict(type="dict", default={}),
            pcie_record=dict(type="path"),
            update_pcie_record=dict(type="bool", default=True),
            world_size=dict(type="int"),
            kernel_log=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    unknown = unknown_rules(params["downgrade"])
    if unknown:
        module.fail_json(msg="downgrade: %s is no preflight rule; the rules are in the module's documentation "
                             "(ansible-doc llmops.vllm.gpu_preflight)" % ", ".join(unknown))
    if params["gpus"] == []:
        module.fail_json(msg="gpus is an empty list, which selects no GPU; leave it unset to check all GPUs")
    if params["world_size"] is not None and params["world_size"] < 1:
        module.fail_json(msg="world_size must be at least 1, got %d" % params["world_size"])
    gen_under_load = pcie_generations(module, params["pcie_gen_under_load"])
    reader = None
    try:
        reader = open_reader(module.run_command, module.get_bin_path("nvidia-smi"), nvml_reader=NvmlHealth,
                             smi_reader=NvidiaSmiHealth, what="the GPUs' health")
        gpus, node, notes = reader.read()
    except GpuQueryError as exc:
        module.fail_json(msg=str(exc), source=reader.source if reader else None)
    finally:
        if reader is not None:
            reader.close()
    present = [gpu["index"] for gpu in gpus]
    missing = [index for index in params["gpus"] or () if index not in present]
    if missing:
        module.fail_json(msg="no GPU with index %s; this node has %s" % (
            ", ".join(map(str, missing)), ", ".join(map(str, present)) or "none"), source=reader.source)
    selected = params["gpus"] or present
    all_gpus, gpus = gpus, [gpu for gpu in gpus if gpu["index"] in selected]
    node["torch_cuda"] = torch_cuda(module, params["torch_python"], notes)
    _runs, cuda_note = cuda_compatible(node.get("cuda_driver_version"), node["torch_cuda"])
    if cuda_note:
        notes.append(cuda_note)
    node["iommu"] = iommu_state([gpu["bus_id"] for gpu in gpus])
    node["nvidia_uvm"] = nvidia_uvm_state()
    notes.extend(nvidia_uvm_notes(node["nvidia_uvm"]))
    # Only a pair of GPUs has a P2P path for ACS to redirect.
    bus_ids = dict((gpu["index"], gpu["bus_id"]) for gpu in gpus if not gpu["fault"] and gpu["bus_id"])
    node["pcie_acs"] = []
    if len(bus_ids) > 1:
        node["pcie_acs"], acs_notes = pcie_acs(bus_ids, module.run_command, module.get_bin_path("lspci"))
        notes.extend(acs_notes)
    node["cache_dir"] = params["cache_dir"]
    node["free_gib"] = free_gib(params["cache_dir"]) if params["cache_dir"] else None
    node["xid_events"] = []
    if params["kernel_log"]:
        text = kernel_log(module, notes)
        if text is not None:
            node["xid_events"] = parse_xids(text, all_gpus)
            notes.extend(xid_notes(node["xid_events"], selected))
    generations, sources = pcie_under_load(module, all_gpus, gen_under_load, notes)
    note = not_judged_note(gpus, generations)
    if note:
        notes.append(note)
    findings, settings = assess(gpus, node, selected=selected, environment=params["environment"],
                                min_free_gib=params["min_free_gib"], downgrade=params["downgrade"],
                                pcie_gen_under_load=generations, world_size=params["world_size"])
    findings.sort(key=lambda finding: finding["severity"] != ERROR)
    errors = [finding["message"] for finding in findings if finding["severity"] == ERROR]
    warnings = [finding["message"] for finding in findings if finding["severity"] != ERROR]
    for warning in warnings:
        module.warn(warning)
    node["p2p"] = dict(("%d-%d" % pair, status) for pair, status in sorted((node["p2p"] or {}).items()))
    module.exit_json(
        changed=False, passed=not errors, errors=errors, warnings_found=warnings, findings=findings,
        nccl_settings=settings, gpus=gpus, node=node, notes=notes, source=reader.source,
        pcie_gen_under_load=dict((gpu["index"], {"generation": generations[gpu["index"]],
                                                 "generation_max": gpu["pcie_gen_max"],
                                                 "read": sources[gpu["index"]]})
                                 for gpu in gpus if gpu["index"] in generations),
        msg="GPU %s: %d error(s), %d warning(s)" % (",".join(map(str, selected)), len(errors), len(warnings)),
    )


if __name__ == "__main__":
    main()
