#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: wait_for_gpu_memory
short_description: Wait until GPUs hold no more than a given amount of memory and no compute process
version_added: 1.0.0
description:
  - Polls GPU memory until every selected GPU uses at most O(max_used_mib) MiB and, with
    O(require_no_processes), no compute process is left on them.
  - Meant for the moment between stopping one inference server and starting the next one, when
    worker processes may still be releasing (or, after a crash, holding on to) GPU memory.
  - Reads GPU memory through NVML when the C(pynvml) Python module (from C(nvidia-ml-py)) imports
    and initialises on the managed host, else through C(nvidia-smi --query-gpu) and
    C(nvidia-smi --query-compute-apps). NVML's memory comes from C(nvmlDeviceGetMemoryInfo_v2) where the
    installed C(pynvml) and driver have it, whose C(used) leaves the driver's reserved memory out as
    C(nvidia-smi)'s C(memory.used) does, else from C(nvmlDeviceGetMemoryInfo).
  - A faulted GPU is never free, and the wait fails at once, naming it and the fix for its board, since waiting
    does not clear a fault. A GPU is faulted where C(nvidia-smi) writes V([GPU requires reset]), V([GPU is lost]) or
    V([Unknown Error]) in place of a reading (it also reads C(temperature.gpu) and C(pstate) for this, since a GPU
    that needs a reset can still read 0 MiB used), where it cannot open the GPU (C(Unable to determine the device
    handle for GPU...)), and where NVML raises C(NVMLError_ResetRequired), C(NVMLError_GpuIsLost) or
    C(NVMLError_Unknown).
  - Each process still holding memory is reported with its command line and the systemd unit it runs
    in, read from C(/proc/<pid>), so a timeout names what to stop.
  - A real driver frees an exited process's memory some seconds after the exit; the wait goes on until
    the memory itself is free, and returns how long that took.
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode the module reads the GPUs once and reports them without waiting or failing, a faulted
      GPU included.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  gpus:
    description:
      - Indices of the GPUs to wait for, as C(nvidia-smi) numbers them.
      - All GPUs of the host when not set. An empty list is refused, since it would select none.
    type: list
    elements: int
  max_used_mib:
    description:
      - Memory in MiB that a GPU may still use and count as free. An idle GPU reports a few
        hundred MiB of driver and context memory.
      - GPUs that do not report their memory use (V([N/A]), V([Not Supported])) are judged by
        their process list alone, with one warning; where no selected GPU reports it, as on unified-memory
        systems such as the GB10, the warning says that O(max_used_mib) was not applied.
    type: int
    default: 1024
  require_no_processes:
    description:
      - Also wait until no compute process is listed on the selected GPUs, whatever memory it holds.
    type: bool
    default: true
  timeout:
    description:
      - Seconds to wait before failing. V(0) checks once.
    type: int
    default: 120
  sleep:
    description:
      - Longest pause in seconds between two checks. Checks start faster and back off to this.
    type: float
    default: 1.0
  kill_orphans_in:
    description:
      - systemd units that should run no process by now, such as the stopped units of an inference
        server. A process of one of them that still holds GPU memory is an orphan, for example an
        engine process left behind when its API server was killed with SIGKILL (vLLM issue 55510).
      - The module kills every process of such a unit with C(systemctl kill --signal=SIGKILL), then
        stops the unit without waiting (C(systemctl stop --no-block)), so that C(Restart=) does not
        bring it back, and waits on. Each unit is killed at most once; a process that outlives
        SIGKILL is named when the wait times out.
      - Processes of any other unit, or of none, are never touched.
      - In check mode the orphans are reported, not killed.
    type: list
    elements: str
    default: []
requirements:
  - The NVIDIA driver with C(nvidia-smi), or the C(pynvml) Python module, on the managed host.
seealso:
  - module: llmops.vllm.wait_for_openai_endpoint
notes:
  - Apart from O(kill_orphans_in), the module never stops processes; stop their units first, then wait.
"""

EXAMPLES = r"""
- name: Wait until the GPUs are free after stopping the previous server
  llmops.vllm.wait_for_gpu_memory:
    timeout: 180
  register: gpu_free

- name: Wait for the first four GPUs only, tolerating a small display context
  llmops.vllm.wait_for_gpu_memory:
    gpus: [0, 1, 2, 3]
    max_used_mib: 2048
    require_no_processes: false

- name: Wait after stopping a server, killing what its stopped units left holding the GPUs
  llmops.vllm.wait_for_gpu_memory:
    timeout: 300
    kill_orphans_in:
      - vllm-kimi-k2.5-baseline.service
      - vllm-kimi-k2.5-ngram.service
  register: gpu_free

- name: Show who holds GPU memory right now, without waiting
  llmops.vllm.wait_for_gpu_memory:
  check_mode: true
  register: gpu_state
"""

RETURN = r"""
elapsed:
  description: Seconds spent waiting.
  returned: always
  type: float
  sample: 3.52
attempts:
  description: Number of times the GPUs were read.
  returned: always
  type: int
  sample: 5
free:
  description: Whether the selected GPUs counted as free at the last check (always V(true) on success outside check mode).
  returned: always
  type: bool
  sample: true
memory_release_seconds:
  description:
    - Seconds between the first check that found no compute process on the selected GPUs and the check
      that found their memory free; how long the driver took to release the memory of exited processes.
    - V(null) while the GPUs are not free.
  returned: always
  type: float
  sample: 4.8
orphans:
  description: Processes of O(kill_orphans_in) units found holding GPU memory, one entry per process and GPU.
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: Process ID on the managed host.
      type: int
      sample: 51877
    command:
      description: Its command line, cut to 200 characters.
      type: str
      sample: "VLLM::EngineCore"
    unit:
      description: The unit it ran in.
      type: str
      sample: vllm-kimi-k2.5-ngram.service
    gpu_index:
      description: Index of the GPU the entry is about.
      type: int
      sample: 0
    used_memory_mib:
      description: Memory it held on that GPU, in MiB; V(null) when not reported.
      type: int
      sample: 85210
    killed:
      description: Whether SIGKILL was sent to its unit (V(false) in check mode or when C(systemctl kill) failed).
      type: bool
      sample: true
source:
  description: Where the readings came from.
  returned: always
  type: str
  choices: [nvml, nvidia-smi]
  sample: nvidia-smi
gpus:
  description: The selected GPUs at the last check.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: GPU index.
      type: int
      sample: 0
    name:
      description: GPU model name.
      type: str
      sample: NVIDIA RTX PRO 6000 Blackwell Server Edition
    memory_used_mib:
      description: Memory in use, in MiB; V(null) when the GPU does not report it.
      type: int
      sample: 512
    memory_total_mib:
      description: Total memory, in MiB; V(null) when the GPU does not report it.
      type: int
      sample: 97887
    fault:
      description:
        - V(GPU requires reset), V(GPU is lost) or V(Unknown Error) for a faulted GPU, whose memory readings are
          then V(null) and which never counts as free; V(null) for a GPU that reads.
      type: str
      sample: null
processes:
  description: Compute processes on the selected GPUs at the last check, one entry per process and GPU.
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: Process ID on the managed host.
      type: int
      sample: 4242
    name:
      description: Process name as the driver reports it; V(null) when it does not.
      type: str
      sample: /opt/vllm/venv/bin/python
    gpu_index:
      description: Index of the GPU the entry is about.
      type: int
      sample: 0
    used_memory_mib:
      description: Memory the process holds on that GPU, in MiB; V(null) when not reported.
      type: int
      sample: 85210
    unit:
      description: The systemd service or scope the process runs in; V(null) when it is in none or has gone.
      type: str
      sample: vllm-kimi-k2.5-baseline.service
    command:
      description: Its command line, cut to 200 characters; V(null) when it has gone or cannot be read.
      type: str
      sample: /opt/vllm/venv/bin/python3 /opt/vllm/venv/bin/vllm serve /srv/models/kimi-k2.5
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.vllm.plugins.module_utils._deadline import Backoff, Deadline
from ansible_collections.llmops.vllm.plugins.module_utils._gpu_memory import (
    GpuMemoryWait,
    GpuQueryError,
    ProbingNvidiaSmiReader,
    open_reader,
)


def unit_killer(module):
    """SIGKILL every process of a unit, then stop it without waiting so that Restart= does not revive it."""
    def kill(unit):
        rc, out, err = module.run_command(["systemctl", "kill", "--signal=SIGKILL", unit])
        if rc != 0:
            return (err or out).strip() or "systemctl kill exited with %d" % rc
        module.run_command(["systemctl", "stop", "--no-block", unit])
        return None
    return kill


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="list", elements="int"),
            max_used_mib=dict(type="int", default=1024),
            require_no_processes=dict(type="bool", default=True),
            timeout=dict(type="int", default=120),
            sleep=dict(type="float", default=1.0),
            kill_orphans_in=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    deadline = Deadline(params["timeout"])
    result = dict(changed=False, failed=False, elapsed=0.0, attempts=0, orphans=[], memory_release_seconds=None)
    if params["timeout"] < 0 or params["sleep"] <= 0 or params["max_used_mib"] < 0:
        result.update(failed=True, msg="timeout and max_used_mib must not be negative, sleep must be positive")
    elif params["gpus"] == []:
        # An empty selection would count as free whatever holds the GPUs.
        result.update(failed=True, msg="gpus is an empty list, which selects no GPU; leave it unset to wait for all GPUs")
    else:
        reader = wait = None
        try:
            reader = open_reader(module.run_command, module.get_bin_path("nvidia-smi"),
                                 smi_reader=ProbingNvidiaSmiReader)
            wait = GpuMemoryWait(reader, gpus=params["gpus"], max_used_mib=params["max_used_mib"],
                                 require_no_processes=params["require_no_processes"],
                                 orphan_units=params["kill_orphans_in"], kill_unit=unit_killer(module))
            result.update(wait.run(deadline, Backoff(cap=params["sleep"], first=min(0.25, params["sleep"])),
                                   check_only=module.check_mode))
            result["changed"] = any(orphan["killed"] for orphan in result["orphans"])
            for warning in wait.warnings:
                module.warn(warning)
        except GpuQueryError as exc:
            result.update(failed=True, msg=str(exc), elapsed=round(deadline.elapsed(), 3),
                          attempts=wait.attempts if wait else 0)
        finally:
            if reader is not None:
                reader.close()

    if result["failed"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
