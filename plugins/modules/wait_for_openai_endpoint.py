#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: wait_for_openai_endpoint
short_description: Wait until a vLLM OpenAI-compatible server serves a model, failing fast when its unit dies
version_added: 1.0.0
description:
  - Follows a vLLM server through its start-up stages. While the model loads nothing listens and
    connections are refused; then C(/health) answers 200; then C(/v1/models) lists the served
    model; optionally a one-token completion succeeds (O(smoke_test)). The server's version comes
    from C(/version).
  - With O(unit), the systemd unit is checked between HTTP attempts. The wait fails at once when
    the unit fails, stops, or restarts (its C(NRestarts) grows past its value when the wait began),
    with the unit's last journal lines and the first real cause of the failure (CUDA or CPU out of
    memory, a KV cache too small, a pydantic C(ValidationError), an engine worker or the server
    killed by a signal such as C(SIGILL) or C(SIGKILL), C(Engine core initialization failed), a
    Python exception, a dead engine). The cause is looked for in the unit's whole journal since it
    last started, up to 100,000 lines, skipping binding-leak noise (Triton's C(nanobind) leak
    report), so it is found however much output followed it.
  - With O(unit), an API server that still answers while its engine has died (a 5xx for the smoke
    completion, or C(/health) answering 503) fails at once too, naming the cause from the journal.
  - Answers that waiting cannot change fail at once with their own message rather than a timeout.
    These are C(/health) answering 503 (the engine died), C(/v1/models) answering 401 or 403 (wrong
    or missing API key), C(/v1/models) listing other models than O(model), and a completion refused
    with a 4xx status.
  - For long loads, O(progress_interval) makes the module return early, not ready, with a progress
    message and a RV(resume) token; a task loop passes the token back so the next call continues the
    same wait. See the examples.
  - With O(unit), a wait that saw the server before it was ready (it waited through a start, not for a
    server that already served) times that start by phase when it finds the server ready. It reads the
    unit's journal since its main process started (C(journalctl -o json), monotonic time stamps of the
    current boot) and returns RV(start_phases) and RV(start_summary). The start ends with the smoke
    completion, or without O(smoke_test) with the server first seen ready. A journal that cannot be read
    only leaves them out, with a warning.
  - Uses the Python standard library only, and connects directly, ignoring proxy variables of the
    environment.
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.vllm.tls_client
attributes:
  check_mode:
    support: full
    details: In check mode the module probes once and reports the stage reached without waiting or failing.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  base_url:
    description:
      - Root URL of the server, as seen from the managed host. An OpenAI-style base URL ending in
        C(/v1) is accepted too.
    type: str
    default: http://127.0.0.1:8000
  model:
    description:
      - Served model name that C(/v1/models) must list (vLLM's C(--served-model-name)).
      - When not set, any listed model will do, and O(smoke_test) uses the first one.
    type: str
  api_key:
    description:
      - API key the server was started with (vLLM's C(--api-key) or E(VLLM_API_KEY)), sent as a bearer token.
    type: str
  timeout:
    description:
      - Seconds the whole wait may take before it fails, counted from the first call when the wait is continued with O(resume).
    type: int
    default: 600
  sleep:
    description:
      - Longest pause in seconds between two attempts. Attempts start faster and back off to this.
      - It also bounds how late a readiness change or, with O(unit), a unit failure is noticed.
    type: float
    default: 0.25
  unit:
    description:
      - systemd unit running the server. When set, the wait fails fast if the unit fails, stops or
        restarts, and progress and failure messages quote its journal.
    type: str
  smoke_test:
    description:
      - Once the model is listed, also require a one-token completion (C(/v1/completions), C(max_tokens=1)) to succeed.
    type: bool
    default: false
  stall_timeout:
    description:
      - With O(unit), fail when nothing has shown progress for this many seconds, well before O(timeout) when a
        load hangs. Progress is a new line in the unit's journal, a change in what the endpoint answers, or, where
        NVML or C(nvidia-smi) reads the GPUs, their memory in use growing or shrinking by 256 MiB (journald holds a
        progress bar's updates until its line ends, so the weights load shows only on the GPUs).
      - Lines that a waiting process repeats are not progress. vLLM's engine logs C(No available shared memory
        broadcast block found in 60 seconds) once a minute through a slow silent phase and through a hang alike,
        and its API server, at DEBUG, a C(Waiting for ... core engine) line every 10 seconds until its engine is up.
        A stall names the last of them in RV(repeated_line).
      - The failure names the last progress line, the phase it tells and the seconds since (RV(stalled),
        RV(last_progress_line), RV(last_progress_phase), RV(seconds_since_progress)).
      - V(0) does not watch for a stall.
    type: int
    default: 0
  phase_stall_timeouts:
    description:
      - Longer stall limits, in seconds, for the phases that are silent by nature, by the name of the phase (the
        milestone it ends at, as in RV(start_phases)), one of V(engine_init), V(weights_loaded), V(torch_compile),
        V(kv_cache), V(cuda_graphs), V(warmup) or V(api_up).
      - While the start is in such a phase (the milestone before it is the furthest its journal shows), the wait
        fails for a stall only after the larger of O(stall_timeout) and this limit. CUDA-graph capture and the
        kernels' warm-up and autotuning update a carriage-return progress bar only, which journald does not pass on.
    type: dict
    default: {}
  progress_interval:
    description:
      - When above V(0), return after this many seconds with RV(ready=false) and a progress message
        if the server is not ready yet, instead of waiting the full O(timeout). The wait fails only
        when the whole O(timeout) is spent.
      - V(0) waits in one call.
    type: int
    default: 0
  resume:
    description:
      - The RV(resume) value returned by the previous call of the same wait, to continue it (same
        deadline, restart baseline, attempt count and stage times). Omit it on the first call.
      - Only valid on the host and boot that produced it, for the same O(base_url) and O(unit).
    type: dict
requirements:
  - C(systemctl) and C(journalctl) on the managed host when O(unit) is set.
seealso:
  - module: llmops.vllm.wait_for_gpu_memory
  - module: ansible.builtin.uri
notes:
  - HTTP probes time out after half a second, so a watched unit is looked at again at least about
    every O(sleep) plus half a second; a unit failure is reported within about one second with the defaults.
  - The progress loop in the examples needs ansible-core 2.18 or later (C(loop_control.break_when)).
"""

EXAMPLES = r"""
- name: Wait until vLLM serves the model
  llmops.vllm.wait_for_openai_endpoint:
    base_url: http://127.0.0.1:8000
    model: kimi-k2.5
    unit: vllm-kimi-k2.5-eagle3.service
    smoke_test: true
    timeout: 900
  register: vllm_ready

# A 1T model loads for half an hour: return every 25 seconds (a line at least every 30 seconds,
# counting the time each call takes to start) so each loop item prints the elapsed time and the
# latest load phase from the unit's journal, and pass the resume token back.
- name: Wait until vLLM serves the model, showing progress
  llmops.vllm.wait_for_openai_endpoint:
    base_url: http://127.0.0.1:8000
    model: kimi-k2.5
    api_key: "{{ vllm_api_key }}"
    unit: vllm-kimi-k2.5-eagle3.service
    smoke_test: true
    timeout: 2400
    progress_interval: 25
    resume: "{{ omit if vllm_ready_try == 0 else vllm_ready.resume }}"
  register: vllm_ready
  loop: "{{ range(0, 2400 // 25 + 2) | list }}"
  loop_control:
    loop_var: vllm_ready_try
    label: "{{ vllm_ready.msg }}"
    break_when:
      - vllm_ready.ready or vllm_ready is failed

- name: Show the vLLM version that came up
  ansible.builtin.debug:
    msg: "{{ (vllm_ready.results | last).version }}"
"""

RETURN = r"""
ready:
  description: Whether the server reached the last stage asked for.
  returned: always
  type: bool
  sample: true
elapsed:
  description: Seconds since the wait began (since the first call when continued with O(resume)).
  returned: always
  type: float
  sample: 1834.217
attempts:
  description: Number of probe passes, counted over all calls of a continued wait.
  returned: always
  type: int
  sample: 7210
stages:
  description: Seconds after the start of the wait at which each stage was first reached.
  returned: always
  type: dict
  contains:
    health:
      description: C(/health) answered 200.
      type: float
      returned: when reached
    models:
      description: C(/v1/models) listed O(model).
      type: float
      returned: when reached
    smoke:
      description: A one-token completion succeeded.
      type: float
      returned: when reached and O(smoke_test=true)
  sample: {"health": 1830.112, "models": 1830.118, "smoke": 1830.402}
version:
  description: The server's vLLM version from C(/version); V(null) until the server is ready or when it does not say.
  returned: always
  type: str
  sample: 0.11.0
models:
  description: Model names C(/v1/models) listed at the last attempt.
  returned: always
  type: list
  elements: str
  sample: [kimi-k2.5]
last_seen:
  description: What the last attempt found, such as V(connection refused on /health) or V(ready).
  returned: always
  type: str
  sample: connection refused on /health
msg:
  description: Outcome in one line; while not ready, the elapsed time, what was last seen, the unit's state and its latest load-phase log line.
  returned: always
  type: str
  sample: "12m30s elapsed, not ready yet; last seen: connection refused on /health; unit active (running); log: Loading weights took 212.33 seconds"
unit_state:
  description: The unit's state at the last attempt.
  returned: when O(unit) is set
  type: dict
  contains:
    load_state:
      description: C(LoadState), for example V(loaded) or V(not-found).
      type: str
    active_state:
      description: C(ActiveState).
      type: str
    sub_state:
      description: C(SubState).
      type: str
    result:
      description: C(Result), for example V(exit-code) or V(oom-kill).
      type: str
    n_restarts:
      description: C(NRestarts); V(null) where systemd does not count restarts.
      type: int
    main_pid:
      description: C(MainPID); V(null) when no main process runs.
      type: int
    exec_main_status:
      description: Exit status (or signal number) of the last main process.
      type: int
    invocation_id:
      description:
        - C(InvocationID), new at every start of the unit, which tells one lifetime of the server from the next;
          V(null) before the unit's first start.
      type: str
      version_added: 1.2.0
  sample: {"load_state": "loaded", "active_state": "failed", "sub_state": "failed", "result": "exit-code",
           "n_restarts": 0, "main_pid": null, "exec_main_status": 1, "invocation_id": "f0c1a4b2e6d54b3c9a7e8d1f2a3b4c5d"}
journal:
  description:
    - The unit's last journal lines of its current run, binding-leak noise left out (a last line says how
      many such lines there were).
  returned: when O(unit) is set and the server is not ready
  type: list
  elements: str
crash_noticed_after:
  description:
    - Seconds from the end of the unit's main process, as systemd recorded it, to the failed result,
      that is, how late the crash was noticed.
  returned: when O(unit) is set and its main process ended during its current run
  type: float
  sample: 0.42
fatal_line:
  description:
    - One sentence that names why the server died; V(null) when no journal line matches a known cause.
    - A journal line that says it in words (an out-of-memory error, a validation error) is quoted as it is.
      A death by signal is spelled out with when it happened and what usually helps, then the line.
  returned: when O(unit) is set and the unit failed, stopped or restarted, or its engine died
  type: str
  sample: "engine worker killed by SIGILL (illegal instruction) on its first request; this CPU lacks an instruction
    that the engine's kernels use for the model's dtype: set dtype: float32 in vllm_serve_args. Journal: ERROR
    11-30 22:54:59 [multiproc_executor.py:315] Worker proc VllmWorker-0 died unexpectedly (exit code: -4),
    shutting down executor."
fatal_cause:
  description: The cause behind RV(fatal_line), for tools that act on it; V(null) when none was found.
  returned: when O(unit) is set and the unit failed, stopped or restarted, or its engine died
  type: dict
  contains:
    name:
      description:
        - Which rule matched, for example V(cuda_out_of_memory), V(cpu_out_of_memory), V(kv_cache_too_small),
          V(validation_error), V(worker_signal), V(process_signal), V(engine_init_failed),
          V(python_exception) or V(engine_dead).
      type: str
    line:
      description: The journal line that matched.
      type: str
    summary:
      description: The cause in words where the line needs interpreting (a signal), else V(null).
      type: str
    hint:
      description: What usually helps, where known, else V(null).
      type: str
  sample: {"name": "worker_signal", "summary": "engine worker killed by SIGILL (illegal instruction)",
           "line": "(EngineCore pid=841) ERROR 11-30 22:54:59 [multiproc_executor.py:315] Worker proc VllmWorker-0
             died unexpectedly (exit code: -4), shutting down executor.",
           "hint": "this CPU lacks an instruction that the engine's kernels use for the model's dtype:
             set dtype: float32 in vllm_serve_args"}
stalled:
  description: Whether the wait failed because nothing showed progress for O(stall_timeout) seconds.
  returned: when the wait stalled
  type: bool
  sample: true
repeated_line:
  description: The newest line that a waiting process repeated after the last progress, else V(null).
  returned: when the wait stalled
  type: str
  sample: "(EngineCore_DP0 pid=4242) WARNING ... [shm_broadcast.py:501] No available shared memory broadcast block
    found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work
    (e.g. compilation, weight/kv cache quantization)."
last_progress_line:
  description: The newest journal line that told the load phase when the last progress was seen.
  returned: when the wait stalled
  type: str
  sample: "(EngineCore_DP0 pid=4242) INFO ... Loading weights took 1501.20 seconds"
last_progress_phase:
  description: The phase that line tells, such as V(weights load done).
  returned: when the wait stalled
  type: str
  sample: weights load done
seconds_since_progress:
  description: Seconds from the last progress to the failure.
  returned: when the wait stalled
  type: float
  sample: 600.4
phase_line:
  description: The latest journal line that tells the load phase (weights, compilation, CUDA graphs, ...), else the latest line.
  returned: when O(unit) is set and the call returns not ready without a unit failure
  type: str
  sample: "Loading safetensors checkpoint shards:  45% Completed | 29/64"
start_phases:
  description:
    - The phases of the start this wait waited through, in start order, each from the previous milestone seen
      in the unit's journal to its own. Milestones that a start did not log (no CUDA graphs with
      C(enforce_eager), no C(torch.compile)) are absent, and their time counts toward the next phase.
    - A milestone is reached at the last journal line that marks it (with tensor parallelism, when the
      slowest worker got there).
    - Only the call that finds the server ready returns them; a continued wait (O(resume)) remembers
      that it saw the server loading.
  returned: when O(unit) is set, the server is ready, the wait saw it before it was ready, and the journal could be read
  type: list
  version_added: 1.1.0
  elements: dict
  contains:
    name:
      description:
        - The milestone that ends the phase, V(engine_init) (the engine core starts), V(weights_loaded),
          V(torch_compile), V(kv_cache) (memory profiled, KV cache sized), V(cuda_graphs) (graphs captured),
          V(warmup) (vLLM's C(init engine ... took)), V(api_up) (the API server listens), and V(first_completion)
          (the smoke completion) or V(ready) (without O(smoke_test)).
      type: str
    label:
      description: The phase in words, as RV(start_summary) names it, for example V(weights load).
      type: str
    seconds:
      description: Length of the phase in seconds.
      type: float
    ended_at_s:
      description: Seconds from the start of the unit's main process to the end of the phase.
      type: float
  sample:
    - {"name": "engine_init", "label": "interpreter and API start-up", "seconds": 38.52, "ended_at_s": 38.52}
    - {"name": "weights_loaded", "label": "weights load", "seconds": 1522.68, "ended_at_s": 1561.2}
    - {"name": "torch_compile", "label": "torch.compile", "seconds": 76.0, "ended_at_s": 1637.2}
    - {"name": "kv_cache", "label": "KV-cache profiling", "seconds": 5.11, "ended_at_s": 1642.31}
    - {"name": "cuda_graphs", "label": "CUDA-graph capture", "seconds": 34.59, "ended_at_s": 1676.9}
    - {"name": "warmup", "label": "warm-up", "seconds": 2.85, "ended_at_s": 1679.75}
    - {"name": "api_up", "label": "API start", "seconds": 4.85, "ended_at_s": 1684.6}
    - {"name": "first_completion", "label": "first completion", "seconds": 2.35, "ended_at_s": 1686.95}
start_summary:
  description: RV(start_phases) in one line, the whole start first.
  returned: when RV(start_phases) is returned
  type: str
  version_added: 1.1.0
  sample: "first completion after 28m07s: interpreter and API start-up 38.5 s, weights load 25m23s, torch.compile 76.0 s,
    KV-cache profiling 5.1 s, CUDA-graph capture 34.6 s, warm-up 2.9 s, API start 4.8 s, first completion 2.3 s"
kv_cache:
  description:
    - The KV cache this start allocated, from the engine's C(KV cache size) log line; V(null) when the journal
      has none.
    - What the trial compares with the context its workloads need at their concurrency.
  returned: when RV(start_phases) is returned
  type: dict
  version_added: 1.2.0
  contains:
    tokens:
      description: Tokens of context the KV cache holds, all requests together.
      type: int
    max_model_len:
      description: The context length that vLLM sized RV(kv_cache.max_concurrency) for; V(null) when not logged.
      type: int
    max_concurrency:
      description: How many requests of RV(kv_cache.max_model_len) tokens fit in the cache at once; V(null) when not logged.
      type: float
  sample: {"tokens": 100752, "max_model_len": 262144, "max_concurrency": 0.38}
resume:
  description: Token to pass as O(resume) to continue this wait in the next call.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.vllm.plugins.module_utils._deadline import StaleToken
from ansible_collections.llmops.vllm.plugins.module_utils._endpoint_probe import EndpointProbe, ReadinessWait
from ansible_collections.llmops.vllm.plugins.module_utils._gpu_memory import GpuQueryError, open_reader
from ansible_collections.llmops.vllm.plugins.module_utils._start_phases import PHASE_LABELS
from ansible_collections.llmops.vllm.plugins.module_utils._systemd_unit import SystemdUnit, UnitQueryError
from ansible_collections.llmops.vllm.plugins.module_utils._tls import client_context


def gpu_memory_reading(module):
    """A function that returns the MiB in use on all GPUs, or None where neither NVML nor nvidia-smi reads them."""
    try:
        reader = open_reader(module.run_command, module.get_bin_path("nvidia-smi"))
    except GpuQueryError:
        return None

    def used_mib():
        try:
            gpus = reader.read()[0]
        except GpuQueryError:
            return None
        known = [gpu["memory_used_mib"] for gpu in gpus if gpu["memory_used_mib"] is not None]
        # [N/A] on every GPU (unified memory, as on a GB10) or faulted GPUs: no reading, rather than 0 MiB for ever.
        return sum(known) if known else None
    return used_mib


def phase_limit_problem(limits):
    """Why a phase_stall_timeouts mapping cannot be used, else None: a mistyped phase must not silently go unlimited."""
    names = [name for name, _label in PHASE_LABELS]
    for name, seconds in sorted(limits.items()):
        if name not in names:
            return "phase_stall_timeouts names no phase %r; the phases are %s" % (name, ", ".join(names))
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 0:
            return "phase_stall_timeouts.%s must be a whole number of seconds, not negative; got %r" % (name, seconds)
    return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            base_url=dict(type="str", default="http://127.0.0.1:8000"),
            model=dict(type="str"),
            api_key=dict(type="str", no_log=True),
            timeout=dict(type="int", default=600),
            sleep=dict(type="float", default=0.25),
            unit=dict(type="str"),
            smoke_test=dict(type="bool", default=False),
            validate_certs=dict(type="bool", default=True),
            ca_path=dict(type="path"),
            progress_interval=dict(type="int", default=0),
            resume=dict(type="dict"),
            stall_timeout=dict(type="int", default=0),
            phase_stall_timeouts=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    params = module.params
    result = dict(changed=False, failed=False, ready=False, elapsed=0.0, attempts=0)
    systemctl = module.get_bin_path("systemctl") if params["unit"] else None
    if params["timeout"] < 0 or params["progress_interval"] < 0 or params["stall_timeout"] < 0 or params["sleep"] <= 0:
        result.update(failed=True, msg="timeout, progress_interval and stall_timeout must not be negative, sleep must "
                                       "be positive")
    elif phase_limit_problem(params["phase_stall_timeouts"]):
        result.update(failed=True, msg=phase_limit_problem(params["phase_stall_timeouts"]))
    elif params["unit"] and not systemctl:
        result.update(failed=True, msg="unit is set but systemctl is not in PATH on this host")
    else:
        unit = None
        if params["unit"]:
            unit = SystemdUnit(params["unit"], module.run_command, systemctl, module.get_bin_path("journalctl"))
        probe = EndpointProbe(params["base_url"], api_key=params["api_key"],
                              ssl_context=client_context(params["validate_certs"], params["ca_path"]))
        try:
            wait = ReadinessWait(probe, params["timeout"], params["sleep"], model=params["model"],
                                 smoke_test=params["smoke_test"], unit=unit,
                                 progress_interval=params["progress_interval"], resume=params["resume"],
                                 stall_timeout=params["stall_timeout"],
                                 phase_stall_timeouts=params["phase_stall_timeouts"],
                                 gpu_memory=gpu_memory_reading(module) if params["stall_timeout"] and unit else None)
        except StaleToken as exc:
            result.update(failed=True, msg="resume does not continue a wait of this host: %s" % exc)
        else:
            try:
                result.update(wait.run(check_only=module.check_mode))
            except UnitQueryError as exc:
                result.update(failed=True, msg=str(exc), elapsed=round(wait.deadline.elapsed(), 3),
                              attempts=wait.attempts)
            for warning in wait.warnings:
                module.warn(warning)

    if result["failed"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
