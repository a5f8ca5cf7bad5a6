# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: benchmark_time_limit
short_description: The longest a benchmark with these options can take, for its async job's limit
version_added: 1.2.0
author:
  - llmops.vllm maintainers (!UNKNOWN)
description:
  - Takes options of P(llmops.vllm.openai_benchmark#module) and gives the seconds to use as the C(async) limit of a
    task that runs it in the background, so that the limit follows the benchmark's own O(llmops.vllm.openai_benchmark#module:timeout)
    and the number of requests instead of a fixed guess.
  - Every request may take the whole timeout and at most a level's concurrency run at once, so a run of a level
    takes at most ceil(num_prompts / level) timeouts, plus num_prompts / request_rate with a request rate; a
    time-boxed run (O(llmops.vllm.openai_benchmark#module:duration_s)) its warm-up, its window and one timeout. The
    warm-up runs at the highest level, and each level adds two readings of the server's metrics. The limit is
    twice that worst case plus two minutes, since it only exists to end a job that hangs.
  - Options left out take the module's defaults.
options:
  _input:
    description: The benchmark's options, for example a workload's C(options).
    type: dict
    required: true
seealso:
  - module: llmops.vllm.openai_benchmark
  - module: llmops.vllm.benchmark_progress
"""

EXAMPLES = r"""
- name: Start the benchmark in the background, with a limit it cannot reach while it works
  llmops.vllm.openai_benchmark:
    base_url: http://127.0.0.1:8000
    model: kimi-k2.5
    concurrency: [1, 8]
    progress_file: ~/.ansible_async/benchmark.progress
  async: "{{ {'concurrency': [1, 8]} | llmops.vllm.benchmark_time_limit }}"
  poll: 0
  register: bench_job

# {"concurrency": [1, 8], "num_prompts": 50, "timeout": 600} | llmops.vllm.benchmark_time_limit
#   => 2 * (600 + 50 * 600 + 7 * 600 + 2 * 2 * (2 * 600 + 10)) + 120 = 79400
"""

RETURN = r"""
_value:
  description: Seconds.
  type: int
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_options import ARGUMENT_SPEC
from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_progress import job_time_limit

_USED = ('concurrency', 'num_prompts', 'duration_s', 'warmup_s', 'warmup_requests', 'repeats', 'timeout', 'request_rate')


def benchmark_time_limit(options):
    if not isinstance(options, Mapping):
        raise AnsibleFilterError(f'benchmark_time_limit: expects the benchmark options as a mapping, got {type(options).__name__}')
    resolved = {name: options[name] if options.get(name) is not None else ARGUMENT_SPEC[name].get('default')
                for name in _USED}
    try:
        return job_time_limit(resolved)
    except (TypeError, ValueError, ZeroDivisionError) as error:
        raise AnsibleFilterError(f'benchmark_time_limit: the options cannot be read: {error}') from error


class FilterModule:
    def filters(self):
        return {'benchmark_time_limit': benchmark_time_limit}
