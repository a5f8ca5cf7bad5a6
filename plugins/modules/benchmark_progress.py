#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: benchmark_progress
short_description: Follow a benchmark that runs as an async job, with a progress line every few seconds
version_added: 1.2.0
description:
  - Waits up to O(interval) seconds for an async job of P(llmops.vllm.openai_benchmark#module) (started with C(async)
    and C(poll=0), and with O(llmops.vllm.openai_benchmark#module:progress_file)) to finish, and returns as soon as it
    finishes or the interval ends.
  - Returns RV(finished) and a progress line in RV(msg), such as C(120/576 requests at concurrency 1, 812 output tok/s
    so far, about 4.2 min left). A task loop with C(loop_control.label) set to RV(msg) prints it once per call, and
    C(break_when) ends the loop once RV(finished) is true; M(ansible.builtin.async_status) then reads the benchmark's
    result. See the examples.
  - The time left is estimated at the pace kept so far; the requests left in the current concurrency level go at that
    level's pace, those of later levels at the whole benchmark's.
  - Reads the job's status file as M(ansible.builtin.async_status) does, in the async directory of the user and
    host the task runs as, so run it with the same C(delegate_to) and C(become) as the benchmark.
  - A job whose benchmark process has gone while its status file still says it runs (the host restarted, the
    process was killed together with Ansible's async wrapper) makes the module fail, as the job would never finish.
  - Sends nothing to the server and changes nothing. The progress file is left in place.
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads the files as outside check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  jid:
    description:
      - The async job's id, the C(ansible_job_id) that the benchmark task registered.
    type: str
    required: true
  progress_file:
    description:
      - The O(llmops.vllm.openai_benchmark#module:progress_file) the benchmark was given.
    type: path
    required: true
  interval:
    description:
      - Seconds to wait at most before returning with the progress so far; V(0) returns at once.
    type: int
    default: 30
  async_dir:
    description:
      - Directory of Ansible's async job files on the host.
      - Defaults to the connection's C(async_dir) (the C(ansible_async_dir) variable or C(ANSIBLE_ASYNC_DIR),
        V(~/.ansible_async) unless set), the one M(ansible.builtin.async_status) reads.
    type: path
    default: ~/.ansible_async
notes:
  - An action plugin fills in O(async_dir) on the controller without contacting the host, so each call is one
    round trip.
seealso:
  - module: llmops.vllm.openai_benchmark
  - module: ansible.builtin.async_status
  - ref: playbooks_async
    description: Asynchronous actions and polling.
"""

EXAMPLES = r"""
- name: Start the benchmark in the background
  llmops.vllm.openai_benchmark:
    base_url: http://127.0.0.1:8000
    model: kimi-k2.5
    concurrency: [1, 8]
    num_prompts: 64
    progress_file: ~/.ansible_async/benchmark-kimi.progress
  async: "{{ {'concurrency': [1, 8], 'num_prompts': 64, 'warmup_requests': 1, 'repeats': 1, 'timeout': 600}
             | llmops.vllm.benchmark_time_limit }}"
  poll: 0
  register: bench_job

- name: Show the benchmark's progress every 30 seconds until it finishes
  llmops.vllm.benchmark_progress:
    jid: "{{ bench_job.ansible_job_id }}"
    progress_file: ~/.ansible_async/benchmark-kimi.progress
    interval: 30
  register: bench_progress
  loop: "{{ range(0, 2000) | list }}"
  loop_control:
    loop_var: bench_poll
    label: "{{ bench_progress.msg | default('starting') }}"
    break_when:
      - bench_progress.finished | default(false) or bench_progress is failed

- name: Read the benchmark's result
  ansible.builtin.async_status:
    jid: "{{ bench_job.ansible_job_id }}"
  register: bench
"""

RETURN = r"""
finished:
  description: Whether the async job has finished; its result is then RV(job), and ready for M(ansible.builtin.async_status).
  returned: always
  type: bool
  sample: false
job:
  description:
    - The benchmark module's result, as M(ansible.builtin.async_status) would read it, without its arguments
      (C(invocation)); C(failed) when the benchmark failed.
  returned: once the job has finished
  type: dict
  version_added: 1.2.0
msg:
  description:
    - The progress line, requests done of planned (warm-up and every repeat counted), failed requests if any, the
      current concurrency level, output tokens per second since the benchmark started, and the time left.
  returned: always
  type: str
  sample: 120/576 requests at concurrency 1, 812 output tok/s so far, about 4.2 min left
remaining_s:
  description: The estimated seconds left; V(null) once finished, or before the first request finished.
  returned: always
  type: float
  sample: 252.0
elapsed:
  description: Seconds this call waited.
  returned: always
  type: float
  sample: 30.0
progress:
  description: The progress file's figures, as the benchmark last wrote them; V(null) before the first write.
  returned: always
  type: dict
  contains:
    started:
      description: When the benchmark started, in seconds since the epoch on the host.
      type: float
    updated:
      description: When the file was last written, in seconds since the epoch on the host.
      type: float
    elapsed:
      description: Seconds from the start of the benchmark to that write.
      type: float
    planned:
      description: Requests planned, warm-up included.
      type: int
    done:
      description: Requests finished, successfully or not.
      type: int
    failed:
      description: Requests that failed.
      type: int
    output_tokens:
      description: Output tokens of the completed requests, from the server's C(usage).
      type: int
    concurrency:
      description: The concurrency level being measured (the highest level during the warm-up).
      type: int
    level_planned:
      description: Requests planned at that level (all its repeats).
      type: int
    level_done:
      description: Requests of that level finished.
      type: int
    level_elapsed:
      description: Seconds since that level began.
      type: float
    finished:
      description: Whether the benchmark had finished when it last wrote the file.
      type: bool
    pid:
      description: Process id of the benchmark.
      type: int
    version:
      description: Version of the file's format.
      type: int
"""


from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_progress import wait_for_job


def main():
    module = AnsibleModule(
        argument_spec=dict(
            jid=dict(type="str", required=True),
            progress_file=dict(type="path", required=True),
            interval=dict(type="int", default=30),
            async_dir=dict(type="path", default="~/.ansible_async"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    async_dir = params["async_dir"]
    result = dict(changed=False, finished=False, progress=None, remaining_s=None, elapsed=0.0)
    if params["interval"] < 0:
        module.fail_json(msg="interval must not be negative", **result)
    try:
        answer = wait_for_job(async_dir, params["jid"], params["progress_file"], params["interval"])
    except OSError as exc:
        module.fail_json(msg="Cannot read the async job %s in %s: %s" % (params["jid"], async_dir, exc), **result)
    gone = answer.pop("gone")
    result.update(answer)
    if gone:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
