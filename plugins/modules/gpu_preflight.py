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
  - Per GPU, persistence mode, uncorrected ECC errors (volatile and aggregate), retired pages pending, row
    remaps pending or failed, SM clocks and throttle reasons, the power limit against its default, and the PCIe
    link's generation and width against their maximum.
  - For the node, the driver's CUDA version against the CUDA the target venv's torch was built for, the
    peer-to-peer matrix between the selected GPUs and the NCCL settings that fit it, the IOMMU's mode for the
    GPUs, and the free disk where vLLM keeps its compile cache.
  - Reads through NVML when the C(pynvml) Python module (from C(nvidia-ml-py)) imports and initialises,
    else through C(nvidia-smi --query-gpu), C(--query-remapped-rows) and C(topo -p2p r).
  - The module fails only when nothing could be read. What the readings mean is in RV(findings) and RV(passed);
    the caller stops on an error. Warnings are also printed as Ansible warnings.
  - "Rules and their severity: an B(error) for V(row_remap_pending), V(row_remap_failed),
    V(retired_pages_pending), V(ecc_volatile_uncorrected), V(pcie_width_below_max), V(throttle_hardware),
    V(cuda_driver_too_old) and V(compile_cache_disk_low); a B(warning) for V(ecc_aggregate_uncorrected),
    V(pcie_gen_below_max) (an idle GPU lowers its link's generation), V(throttle_software),
    V(power_limit_below_default), V(persistence_off), V(p2p_unsupported) and V(p2p_iommu_translating)."
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads; check mode runs it as usual.
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
requirements:
  - The NVIDIA driver with C(nvidia-smi), or the C(pynvml) Python module, on the managed host.
seealso:
  - module: llmops.vllm.wait_for_gpu_memory
notes:
  - A PCIe link's generation drops while the GPU is idle, which is why a generation below its maximum is a
    warning; a width below its maximum does not recover under load and is an error.
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
  sample: ["GPU 0: PCIe generation 1 of 5 (...). Fix: read it again under load ..."]
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
      persistence_mode: true
      ecc_volatile_uncorrected: 0
      remap_pending: false
      pcie_width: 16
      pcie_width_max: 16
      throttle_reasons: [gpu_idle]
node:
  description: The node's readings, the driver's and torch's CUDA versions, the P2P matrix as C(a-b) keys, the
    IOMMU's mode and the free disk.
  returned: success
  type: dict
  sample:
    driver_version: 580.95.05
    cuda_driver_version: "13.0"
    torch_cuda: "12.8"
    p2p: {"0-1": OK, "1-0": OK}
    iommu: {enabled: false, translating: []}
    free_gib: 812.4
notes:
  description: Readings this node could not give, and checks skipped for it.
  returned: success
  type: list
  elements: str
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
from ansible_collections.llmops.vllm.plugins.module_utils._gpu_findings import ERROR, assess, unknown_rules
from ansible_collections.llmops.vllm.plugins.module_utils._gpu_health import (
    NvidiaSmiHealth,
    NvmlHealth,
    free_gib,
    iommu_state,
)
from ansible_collections.llmops.vllm.plugins.module_utils._gpu_memory import GpuQueryError, open_reader

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


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="list", elements="int"),
            environment=dict(type="dict", default={}),
            torch_python=dict(type="path"),
            cache_dir=dict(type="path"),
            min_free_gib=dict(type="float", default=20),
            downgrade=dict(type="list", elements="str", default=[]),
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
    gpus = [gpu for gpu in gpus if gpu["index"] in selected]
    node["torch_cuda"] = torch_cuda(module, params["torch_python"], notes)
    node["iommu"] = iommu_state([gpu["bus_id"] for gpu in gpus])
    node["cache_dir"] = params["cache_dir"]
    node["free_gib"] = free_gib(params["cache_dir"]) if params["cache_dir"] else None
    if node["p2p"] is None:
        notes.append("peer-to-peer between the GPUs was not judged")
    findings, settings = assess(gpus, node, selected=selected, environment=params["environment"],
                                min_free_gib=params["min_free_gib"], downgrade=params["downgrade"])
    findings.sort(key=lambda finding: finding["severity"] != ERROR)
    errors = [finding["message"] for finding in findings if finding["severity"] == ERROR]
    warnings = [finding["message"] for finding in findings if finding["severity"] != ERROR]
    for warning in warnings:
        module.warn(warning)
    node["p2p"] = dict(("%d-%d" % pair, status) for pair, status in sorted((node["p2p"] or {}).items()))
    module.exit_json(
        changed=False, passed=not errors, errors=errors, warnings_found=warnings, findings=findings,
        nccl_settings=settings, gpus=gpus, node=node, notes=notes, source=reader.source,
        msg="GPU %s: %d error(s), %d warning(s)" % (",".join(map(str, selected)), len(errors), len(warnings)),
    )


if __name__ == "__main__":
    main()
