#!/usr/bin/python
# Copyright (c) 2025, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: openai_benchmark
short_description: Benchmark an OpenAI-compatible server the way C(vllm bench serve) does
version_added: 1.0.0
description:
  - Streams completions from an OpenAI-compatible server (vLLM) with a seeded prompt set, at one or more concurrency
    levels, and reports the metrics C(vllm bench serve) reports, with the same names and definitions.
  - Token counts come from the C(usage) of each stream (requested with C(stream_options.include_usage)). TTFT is
    the time to the first token chunk, E2E latency the time to the last one, TPOT is (E2E - TTFT) / (output tokens
    - 1), ITL is every gap between token chunks. Under speculative decoding one chunk can carry several tokens, so
    compare variants on TPOT and output throughput rather than ITL.
  - When the server's Prometheus endpoint exports vLLM's speculative-decoding counters, each result also carries
    the draft acceptance measured over that level.
  - Failed requests never raise. They are counted in RV(results[].failed) and grouped in RV(results[].errors), and
    the module returns normally so that the play decides what a partial failure means. The module fails only when
    no request succeeded at all, or when every warm-up request failed (then no level is measured).
  - The load generator uses only the Python standard library. Run the task on the controller or a load-generator
    host with C(delegate_to), not on the GPU node, so that the client does not compete with the server for CPU.
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.vllm.tls_client
attributes:
  check_mode:
    support: full
    details: In check mode no request is sent; RV(results) is empty and RV(msg) says so.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  base_url:
    description:
      - Root URL of the server, without C(/v1), for example V(http://127.0.0.1:8000).
    type: str
    required: true
  model:
    description:
      - Model name sent in each request (the server's C(--served-model-name)).
    type: str
    required: true
  api_key:
    description:
      - Sent as a bearer token when the server was started with C(--api-key).
    type: str
  endpoint:
    description:
      - V(completions) streams from C(/v1/completions); V(chat) streams from C(/v1/chat/completions), through the
        model's chat template, as chat clients and agents do. A prompt of a plain prompt set becomes a single user
        message.
    type: str
    choices: [completions, chat]
    default: completions
  prompt_set:
    description:
      - A built-in seeded prompt set, or the path of a replay file on the host that runs the module. A file's
        requests are used in order and repeated when there are fewer than needed.
      - V(novel_reasoning) asks for reasoning over freshly generated numbers and names; the answer repeats little of
        the prompt, which is where prompt-lookup (n-gram) drafting has nothing to propose.
      - V(code_editing) asks for a small generated Python file back with one edit, and V(summarization) for a summary
        that quotes a generated report; both answers copy much of the prompt, which is where n-gram drafting wins.
      - V(tool_calls) (O(endpoint=chat) only) sends a system prompt, an operations request that needs tools, and
        three OpenAI-style tool definitions, the path a server started with a tool-call parser takes.
      - Built-in prompts stay under about 1200 characters, so they fit small test models; see O(context_tokens).
      - Replay files are JSONL, one request per line, each an object with a string C(prompt), or an OpenAI-style
        chat request with a list C(messages) and optional C(tools) and C(max_tokens) (or C(max_completion_tokens)),
        each line's sampling (C(temperature), C(top_p), C(top_k), C(min_p), the penalties, C(seed)) kept as captured;
        or ShareGPT-style JSON, a list of objects whose C(conversations) list turns with C(from) (V(system),
        V(human), V(gpt)) and C(value). A conversation is replayed with its history up to its last human turn, and
        the recorded answer after that turn sets its output length. Requests with C(messages) need
        O(endpoint=chat).
      - The text of the requests is never returned; RV(results[].prompt_set_sha256) names them.
    type: str
    default: novel_reasoning
  context_tokens:
    description:
      - Pad every request with seeded report-like reference text, put before its first user text, until it holds
        about this many tokens (4 characters a token), for long-context traffic. Requests already as long are sent
        unchanged.
    type: int
  chat_template_kwargs:
    description:
      - Sent with every chat request, for the model's chat template; for example C(thinking=true) turns on the
        thinking of a reasoning model whose template reads that flag.
    type: dict
  tools:
    description:
      - OpenAI-style tool definitions sent with every chat request that does not carry its own.
    type: list
    elements: dict
  tool_choice:
    description:
      - The C(tool_choice) of chat requests that carry tools. Without it the server picks its default (vLLM uses
        V(auto) when tools are sent, which needs a server started with C(--enable-auto-tool-choice)); V(none) sends
        the tools to the chat template but lets no tool call be parsed.
    type: str
    choices: [auto, none, required]
  num_prompts:
    description:
      - Number of measured requests per concurrency level and repeat. Every request of a run gets its own prompt, so
        no level or repeat is helped by a prefix cache that an earlier one filled.
      - V(50) when neither this nor O(duration_s) is set; mutually exclusive with O(duration_s).
    type: int
  duration_s:
    description:
      - Measure each level and repeat over a window of this many seconds instead of a count of requests. The level's
        streams are kept busy (closed loop at its concurrency, each sending its next request as its last one ends)
        through O(warmup_s) and then the window; every stream still open when the window ends is cut there, and its
        request aborted.
      - Output throughput counts every token that arrived inside the window, from the streams it cut and the streams
        begun in the warm-up too, by the server's own count on each chunk (C(stream_options.continuous_usage_stats)).
        TTFT and TPOT come from the requests sent inside the window, the cut ones up to their last token; E2E latency
        from those that completed. A level then costs the same time whatever the answers' lengths.
      - Not with O(num_prompts) or O(request_rate). Each window draws its prompts from its own share of the prompt set
        (64 a stream), in order, starting its share again when it needs more.
    type: float
    version_added: 1.2.0
  warmup_s:
    description:
      - Seconds of the same closed-loop traffic before each window, not measured, so that the window starts with
        every stream busy. At most O(duration_s). Requires O(duration_s).
    type: float
    version_added: 1.2.0
  concurrency:
    description:
      - Maximum number of requests in flight (C(--max-concurrency) of C(vllm bench serve)). Each level is measured
        in turn and gives one entry of RV(results).
    type: list
    elements: int
    default: [1]
  request_rate:
    description:
      - Requests sent per second, with gamma-distributed gaps (a Poisson process unless O(burstiness) is set).
        Requests still wait for a free slot under O(concurrency).
      - When not set, all requests are queued at once and O(concurrency) alone paces them.
    type: float
  burstiness:
    description:
      - Shape of the gamma distribution of the gaps between requests; below 1 is burstier than Poisson, above 1 more
        even. Defaults to V(1.0) (Poisson).
      - Requires O(request_rate).
    type: float
  max_tokens:
    description:
      - Maximum output tokens per request (C(max_tokens), or C(max_completion_tokens) for V(chat)). A replayed
        request with its own output length keeps it, up to this limit.
    type: int
    default: 256
  temperature:
    description:
      - Sampling temperature; V(0) is greedy.
      - Unset, as every sampling option, it is left out of the requests, so vLLM samples with the model's own
        C(generation_config.json) defaults, as it does for clients that name none. A trial should sample as the
        node's traffic does; speculative decoding's acceptance falls as the temperature rises.
      - A replayed request keeps the sampling it was captured with; these options fill in what it left out.
    type: float
  top_p:
    description:
      - Nucleus sampling, greater than V(0) and at most V(1). Unset leaves the model's default.
    type: float
    version_added: 1.2.0
  top_k:
    description:
      - Sample from this many most likely tokens; V(-1) or V(0) for no limit. Unset leaves the model's default.
    type: int
    version_added: 1.2.0
  min_p:
    description:
      - Smallest probability, relative to the most likely token's, that a token needs to be sampled; V(0) to V(1).
    type: float
    version_added: 1.2.0
  presence_penalty:
    description:
      - OpenAI's presence penalty, V(-2) to V(2).
    type: float
    version_added: 1.2.0
  frequency_penalty:
    description:
      - OpenAI's frequency penalty, V(-2) to V(2).
    type: float
    version_added: 1.2.0
  repetition_penalty:
    description:
      - vLLM's repetition penalty, greater than V(0); V(1) is none.
    type: float
    version_added: 1.2.0
  sampling_seed:
    description:
      - Seeds the server's sampling. Request number N (counting the warm-up) is sent with O(sampling_seed) plus N,
        so that both sides of a trial sample the same prompt with the same seed.
      - Unset sends no seed. O(seed) seeds the prompts, not the sampling.
    type: int
    version_added: 1.2.0
  ignore_eos:
    description:
      - Ask vLLM to keep generating past the end-of-sequence token, so every request produces O(max_tokens) tokens.
      - Off by default, as real clients stop at the end of the answer; turn it on to compare variants on exactly equal
        work with a model whose answers end early.
    type: bool
    default: false
  warmup_requests:
    description:
      - Requests sent before the first level and left out of the results.
    type: int
    default: 1
  repeats:
    description:
      - How many times each level is measured. Above V(1), the level's metrics pool all repeats and the output
        throughput of each repeat, their mean and a 95% confidence interval are added.
    type: int
    default: 1
  seed:
    description:
      - Seeds the built-in prompt sets and the request arrival times. The same seed gives the same prompts.
    type: int
    default: 0
  timeout:
    description:
      - Seconds one request may take from being sent to its last byte; a request that takes longer counts as failed
        with error kind V(timeout). Also bounds each read of O(metrics_url).
    type: float
    default: 600
  metrics_url:
    description:
      - Prometheus endpoint read before and after each level for vLLM's speculative-decoding counters.
      - Defaults to O(base_url) followed by C(/metrics).
    type: str
  stop_when_slower:
    description:
      - Stop the benchmark early once a sequential test shows the variant losing against a baseline measured
        before, so that a variant certainly slower does not use up the time of its remaining runs.
      - After each run of a level from the second on (up to the fifth), the output throughput of the level's runs
        so far is compared with O(stop_when_slower.baseline_runs) of that level by Welch's interval at 99%; by
        Bonferroni's inequality, its four looks at most err 4% of the time together, within the 5% of the verdict
        of P(llmops.vllm.trial_decision#module). When the interval lies entirely below 0 (O(stop_when_slower.keep_when=faster))
        or below minus O(stop_when_slower.margin_pct) (V(not_slower)), the level's remaining runs and the
        remaining levels are skipped, and the result says so in RV(stopped_early) and RV(results[].stopped_early).
      - The look knows only the noise within the two server lifetimes. P(llmops.vllm.trial_decision#module) judges a
        stopped level again with how the baseline's lifetimes differ, and calls it slower only when the loss stands
        out of that too.
      - The last run of the last level is not tested, as there is nothing left to skip.
      - Without this option every run of every level is measured.
    type: dict
    version_added: 1.1.0
    suboptions:
      baseline_runs:
        description:
          - Output throughput (tokens/s) of each run of the baseline, by concurrency level; for example the
            RV(results[].output_throughput_repeats) of the baseline's benchmark. A level not listed, or listed with
            fewer than two runs, is never stopped.
        type: dict
        required: true
      margin_pct:
        description:
          - The margin of the verdict, in percent; used with O(stop_when_slower.keep_when=not_slower).
        type: float
        default: 8.0
      keep_when:
        description:
          - The verdict's rule. V(not_slower) keeps a variant shown to be at most O(stop_when_slower.margin_pct)
            slower, so the test stops when it is shown slower than that; V(faster) needs it shown faster, so the test
            stops when it is shown slower at all.
        type: str
        choices: [not_slower, faster]
        default: not_slower
  progress_file:
    description:
      - While the benchmark runs, keep how far it has come in this file on the host that runs the module, as a
        small JSON document replaced whole about once a second, with requests done and planned (the warm-up and
        every repeat of every level), failed requests, output tokens and elapsed time.
      - Meant for a benchmark started as an async job (C(async) with C(poll=0)), which
        P(llmops.vllm.benchmark_progress#module) follows, printing a progress line every few seconds; see its
        examples.
      - The file is not removed at the end. Without this option no file is written.
    type: path
    version_added: 1.2.0
  labels:
    description:
      - Free-form facts about what is measured (model, variant, unit checksum, vLLM version, speculative config),
        returned unchanged in RV(labels) so that a results callback can file the result.
    type: dict
    default: {}
notes:
  - Error kinds in RV(results[].errors) are V(connection_refused), V(connection_closed) (the server closed the
    connection mid-request), V(timeout), V(http_<status>) (for example V(http_500)), V(stream_error) (an error
    event inside the stream), V(incomplete_stream) (the stream ended without the C([DONE]) event), V(no_tokens),
    V(protocol_error) and V(connection_error).
seealso:
  - name: vllm bench serve
    description: The benchmark whose metric definitions this module follows.
    link: https://docs.vllm.ai/en/latest/cli/bench/serve.html
"""

EXAMPLES = r"""
- name: Benchmark the running variant at three concurrency levels
  llmops.vllm.openai_benchmark:
    base_url: http://127.0.0.1:8000
    model: kimi-k2.5
    prompt_set: code_editing
    concurrency: [1, 4, 16]
    num_prompts: 64
    labels:
      model: kimi-k2.5
      variant: ngram
  delegate_to: localhost
  register: bench

- name: Show output throughput per level
  ansible.builtin.debug:
    msg: "{{ bench.results | map(attribute='output_throughput') | list }}"

- name: Poisson arrivals at 2 requests/s, three repeats for a confidence interval
  llmops.vllm.openai_benchmark:
    base_url: http://127.0.0.1:8000
    model: kimi-k2.5
    api_key: "{{ vllm_api_key }}"
    endpoint: chat
    request_rate: 2
    concurrency: [8]
    repeats: 3
    seed: 42
  delegate_to: localhost
  register: bench

- name: Replay captured multi-turn conversations through the chat template, thinking on, at two levels
  llmops.vllm.openai_benchmark:
    base_url: http://127.0.0.1:8000
    model: moonshotai/Kimi-K2.5
    api_key: "{{ vllm_api_key }}"
    endpoint: chat
    prompt_set: /srv/traffic/conversations.jsonl
    chat_template_kwargs:
      thinking: true
    max_tokens: 4096
    concurrency: [1, 8]
    repeats: 3
  delegate_to: localhost
  register: bench

- name: Benchmark a variant, stopping early once it is shown more than 5% slower than the baseline
  llmops.vllm.openai_benchmark:
    base_url: http://127.0.0.1:8000
    model: kimi-k2.5
    concurrency: [1, 8]
    repeats: 5
    stop_when_slower:
      baseline_runs: "{{ baseline_bench.results | items2dict(key_name='max_concurrency', value_name='output_throughput_repeats') }}"
      margin_pct: 5
      keep_when: not_slower
  delegate_to: localhost
  register: bench

- name: Stop when more than 1% of requests failed
  ansible.builtin.assert:
    that: bench.results[0].failed <= bench.results[0].completed * 0.01
    fail_msg: "{{ bench.results[0].errors }}"
"""

RETURN = r"""
msg:
  description: What was done.
  returned: always
  type: str
  sample: Measured 3 concurrency levels; 150 of 150 requests succeeded.
labels:
  description: The O(labels) option, unchanged.
  returned: always
  type: dict
  sample: {"model": "kimi-k2.5", "variant": "ngram"}
options:
  description: The benchmark options used, with O(metrics_url) resolved and without O(api_key) and O(labels).
  returned: always
  type: dict
  sample: {"base_url": "http://127.0.0.1:8000", "concurrency": [1, 4], "endpoint": "completions", "num_prompts": 50}
errors:
  description: Failed warm-up requests by error kind, each with C(count) and C(first_message).
  returned: when every warm-up request failed
  type: dict
  sample:
    connection_refused:
      count: 1
      first_message: "ConnectionRefusedError: [Errno 111] Connection refused"
stopped_early:
  description: Whether O(stop_when_slower) stopped the benchmark before its end.
  returned: when O(stop_when_slower) is set and check mode is off
  type: bool
  sample: true
  version_added: 1.1.0
stopped_early_reason:
  description: Which level stopped the benchmark, after which run, the sequential test's figures and the levels skipped.
  returned: when RV(stopped_early) is true
  type: str
  sample: "at concurrency 4, stopped after run 2 of 5: 2 runs of the variant against 5 of the baseline: output tok/s -19.0%
    (99% interval -31.2% to -6.8%, look 1 of at most 4); the interval ends below -5.0%, so it cannot be shown at most 5.0%
    slower; levels 8, 16 skipped"
  version_added: 1.1.0
results:
  description:
    - One entry per O(concurrency) level, in order, with the keys C(vllm bench serve) saves. Times are in
      milliseconds, throughputs per second.
    - Empty in check mode.
  returned: always
  type: list
  elements: dict
  contains:
    max_concurrency:
      description: The concurrency level.
      type: int
      sample: 4
    duration:
      description: Seconds from the first request sent to the last one finished, summed over repeats.
      type: float
      sample: 21.7
    completed:
      description:
        - Requests that streamed at least one token chunk and ended with the C([DONE]) event; in a time-boxed window,
          those sent inside it that ended before it closed.
      type: int
      sample: 50
    latency_samples_ms:
      description:
        - Every measured request's own TTFT, TPOT and E2E latency in milliseconds (C(ttft), C(tpot), C(e2el)), so
          that a trial can judge a percentile on the requests of all its lifetimes pooled.
      type: dict
      version_added: 1.2.0
    window_s:
      description: The window each run of the level was measured over, with O(duration_s).
      returned: with O(duration_s)
      type: float
      sample: 600.0
      version_added: 1.2.0
    cut_streams:
      description: Streams that the windows' ends cut, over all runs of the level, with O(duration_s).
      returned: with O(duration_s)
      type: int
      sample: 8
      version_added: 1.2.0
    failed:
      description: Requests that did not complete.
      type: int
      sample: 0
    errors:
      description: Failed requests by error kind, each with C(count) and C(first_message). Empty when none failed.
      type: dict
      sample: {"http_500": {"count": 2, "first_message": "HTTP 500 Internal Server Error: engine dead"}}
    finish_reasons:
      description: How many completed answers ended with each C(finish_reason) (V(unknown) when the server sent none).
      type: dict
      version_added: 1.2.0
      sample: {"stop": 61, "length": 3}
    max_tokens_share:
      description:
        - Share of the completed answers that stopped at O(max_tokens) (C(finish_reason) V(length)), from 0 to 1.
        - A high share means the answers were cut short, thinking included, and the trial measured shorter answers
          than the node serves. V(null) when the server sent no finish reason.
      type: float
      version_added: 1.2.0
      sample: 0.047
    total_input_tokens:
      description: Prompt tokens of the completed requests, from the server's C(usage).
      type: int
      sample: 7410
    max_input_tokens:
      description: The longest prompt of the completed requests in tokens, from the server's C(usage); V(0) when none completed.
      type: int
      sample: 412
      version_added: 1.2.0
    total_output_tokens:
      description: Output tokens of the completed requests, from the server's C(usage).
      type: int
      sample: 12800
    request_throughput:
      description: Completed requests per second.
      type: float
      sample: 2.3
    output_throughput:
      description: Output tokens per second.
      type: float
      sample: 589.9
    total_token_throughput:
      description: Prompt and output tokens per second.
      type: float
      sample: 931.3
    mean_ttft_ms:
      description: Mean time to first token chunk, in milliseconds.
      type: float
      sample: 31.2
    median_ttft_ms:
      description: Median time to first token chunk, in milliseconds.
      type: float
      sample: 31.2
    std_ttft_ms:
      description: Population standard deviation of the time to first token chunk, in milliseconds.
      type: float
      sample: 2.5
    p90_ttft_ms:
      description: 90th percentile (linear interpolation) of the time to first token chunk, in milliseconds.
      type: float
    p99_ttft_ms:
      description: 99th percentile (linear interpolation) of the time to first token chunk, in milliseconds.
      type: float
      sample: 40.6
    mean_tpot_ms:
      description:
        - Mean time per output token after the first (TPOT, over requests with more than one output token), in
          milliseconds.
      type: float
      sample: 13.5
    median_tpot_ms:
      description:
        - Median time per output token after the first (TPOT, over requests with more than one output token), in
          milliseconds.
      type: float
      sample: 13.5
    std_tpot_ms:
      description:
        - Population standard deviation of the time per output token after the first (TPOT, over requests with more
          than one output token), in milliseconds.
      type: float
      sample: 1.1
    p90_tpot_ms:
      description: 90th percentile (linear interpolation) of the time per output token after the first, in milliseconds.
      type: float
    p99_tpot_ms:
      description:
        - 99th percentile (linear interpolation) of the time per output token after the first (TPOT, over requests
          with more than one output token), in milliseconds.
      type: float
      sample: 17.6
    mean_itl_ms:
      description: Mean inter-token latency (every gap between token chunks of every request), in milliseconds.
      type: float
      sample: 13.4
    median_itl_ms:
      description: Median inter-token latency (every gap between token chunks of every request), in milliseconds.
      type: float
      sample: 13.4
    std_itl_ms:
      description:
        - Population standard deviation of the inter-token latency (every gap between token chunks of every request),
          in milliseconds.
      type: float
      sample: 1.1
    p90_itl_ms:
      description: 90th percentile (linear interpolation) of the inter-token latency, in milliseconds.
      type: float
    p99_itl_ms:
      description:
        - 99th percentile (linear interpolation) of the inter-token latency (every gap between token chunks of every
          request), in milliseconds.
      type: float
      sample: 17.4
    mean_e2el_ms:
      description: Mean end-to-end latency (request sent to last token chunk), in milliseconds.
      type: float
      sample: 3480.0
    median_e2el_ms:
      description: Median end-to-end latency (request sent to last token chunk), in milliseconds.
      type: float
      sample: 3480.0
    std_e2el_ms:
      description:
        - Population standard deviation of the end-to-end latency (request sent to last token chunk), in milliseconds.
      type: float
      sample: 278.4
    p90_e2el_ms:
      description: 90th percentile (linear interpolation) of the end-to-end latency, in milliseconds.
      type: float
    p99_e2el_ms:
      description:
        - 99th percentile (linear interpolation) of the end-to-end latency (request sent to last token chunk), in
          milliseconds.
      type: float
      sample: 4524.0
    foreign_requests:
      description:
        - Requests the server finished during the level beyond those the benchmark sent, plus those still running
          or waiting once the benchmark's own were done, from the server's C(vllm:request_success_total) and
          C(vllm:num_requests_running) / C(vllm:num_requests_waiting) read before and after the level (each reading
          taken once the server's queue is empty, or after 5 seconds). Above 0, the level did not measure the
          server alone; M(llmops.vllm.trial_decision) calls it contaminated.
        - V(null) when O(metrics_url) could not be read or exports none of these.
      returned: always
      type: int
      sample: 0
      version_added: 1.2.0
    server_requests_before:
      description: The server's own reading before the level, C(finished), C(running) and C(waiting); V(null) without one.
      returned: always
      type: dict
      sample: {finished: 132, running: 0, waiting: 0}
      version_added: 1.2.0
    server_requests_after:
      description: The same reading after the level.
      returned: always
      type: dict
      sample: {finished: 260, running: 0, waiting: 0}
      version_added: 1.2.0
    spec_decode_acceptance_rate:
      description: Accepted / drafted tokens over the level, in percent (as C(vllm bench serve) reports it).
      returned: when O(metrics_url) exports vLLM's speculative-decoding counters and tokens were drafted
      type: float
      sample: 65.6
    spec_decode_acceptance_length:
      description: Mean tokens gained per draft, 1 + accepted tokens / drafts.
      returned: when O(metrics_url) exports vLLM's speculative-decoding counters and tokens were drafted
      type: float
      sample: 3.97
    spec_decode_num_drafts:
      description: Drafts proposed during the level.
      returned: with RV(results[].spec_decode_acceptance_rate)
      type: int
      sample: 3224
    spec_decode_draft_tokens:
      description: Tokens drafted during the level.
      returned: with RV(results[].spec_decode_acceptance_rate)
      type: int
      sample: 16120
    spec_decode_accepted_tokens:
      description: Drafted tokens accepted during the level.
      returned: with RV(results[].spec_decode_acceptance_rate)
      type: int
      sample: 9575
    spec_decode_per_position_acceptance_rates:
      description: For each draft position, the share of drafts whose token at that position was accepted.
      returned: with RV(results[].spec_decode_acceptance_rate)
      type: list
      elements: float
      sample: [0.81, 0.66, 0.58, 0.49, 0.43]
    prompt_set_sha256:
      description:
        - SHA-256 of the prompts sent (warm-up and measured, in order, as JSON), which names the prompt set,
          its seed and its size; equal values mean the same prompts.
      returned: always
      type: str
    output_throughput_repeats:
      description: Output throughput of each repeat.
      returned: when O(repeats) is above 1
      type: list
      elements: float
      sample: [588.1, 592.4, 589.3]
    output_throughput_mean:
      description: Mean of RV(results[].output_throughput_repeats).
      returned: when O(repeats) is above 1
      type: float
      sample: 589.9
    output_throughput_ci95:
      description: Half-width of the 95% confidence interval of that mean (Student's t).
      returned: when O(repeats) is above 1
      type: float
      sample: 5.5
    stopped_early:
      description: The sequential test of O(stop_when_slower) stopped this level before its last run.
      returned: when this level stopped the benchmark
      type: bool
      sample: true
      version_added: 1.1.0
    stopped_early_reason:
      description: After which run this level stopped, with the sequential test's figures.
      returned: when this level stopped the benchmark
      type: str
      sample: "stopped after run 2 of 5: 2 runs of the variant against 5 of the baseline: output tok/s -19.0% (99% interval
        -31.2% to -6.8%, look 1 of at most 4); the interval ends below -5.0%, so it cannot be shown at most 5.0% slower"
      version_added: 1.1.0
    stopped_early_test:
      description:
        - The sequential test's figures, in percent of the baseline's mean output throughput.
      returned: when this level stopped the benchmark
      type: dict
      version_added: 1.1.0
      contains:
        look:
          description: Which look stopped it; 1 is the look after the second run.
          type: int
        variant_runs:
          description: Runs of the variant measured.
          type: int
        baseline_runs:
          description: Runs of the baseline compared with.
          type: int
        delta_pct:
          description: Change of the mean output throughput against the baseline's.
          type: float
        lower_pct:
          description: Lower end of the interval of that change.
          type: float
        upper_pct:
          description: Upper end of the interval of that change.
          type: float
        threshold_pct:
          description: What the upper end fell below (0, or minus the margin).
          type: float
        confidence_pct:
          description: Two-sided confidence of the interval of one look.
          type: float
"""


from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_options import (
    ARGUMENT_SPEC,
    REQUIRED_BY,
    level_number,
    measured_prompts,
    option_problems,
)
from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_progress import ProgressWriter, planned_requests
from ansible_collections.llmops.vllm.plugins.module_utils._load_generation import (
    BenchmarkAborted,
    run_benchmark,
)
from ansible_collections.llmops.vllm.plugins.module_utils._tls import client_context


def _stop_settings(stop):
    """stop_when_slower with its levels as integers (YAML and JSON give mapping keys as strings)."""
    if stop is None:
        return None
    return dict(stop, baseline_runs={level_number(level): [float(value) for value in runs]
                                     for level, runs in stop["baseline_runs"].items()})


def _stopped_early(results, levels):
    """The top-level account of an early stop: which level stopped, why, and the levels never measured."""
    stopped = [level for level in results if level.get("stopped_early")]
    if not stopped:
        return {"stopped_early": False}
    level = stopped[0]
    skipped = levels[len(results):]
    reason = "at concurrency %s, %s" % (level["max_concurrency"], level["stopped_early_reason"])
    if skipped:
        reason += "; level%s %s skipped" % ("" if len(skipped) == 1 else "s", ", ".join(str(key) for key in skipped))
    return {"stopped_early": True, "stopped_early_reason": reason}


def main():
    # Where progress goes is the module's own concern, not a workload's, so it is not in the shared ARGUMENT_SPEC.
    module = AnsibleModule(
        argument_spec=dict(ARGUMENT_SPEC, progress_file=dict(type="path")),
        required_by=REQUIRED_BY,
        supports_check_mode=True,
    )
    params = dict(module.params)
    params["base_url"] = params["base_url"].rstrip("/")
    params["metrics_url"] = params["metrics_url"] or params["base_url"] + "/metrics"
    params["burstiness"] = params["burstiness"] or 1.0
    params["num_prompts"] = measured_prompts(params)
    # How the client trusts the server, when it may stop and where it reports progress are not part of what was
    # measured.
    options = {key: value for key, value in params.items()
               if key not in ("api_key", "labels", "validate_certs", "ca_path", "stop_when_slower", "progress_file")}
    result = dict(changed=False, labels=params["labels"], options=options, results=[])

    failure = None
    problems = option_problems(module.params)
    if problems:
        failure = "; ".join("%s %s" % problem for problem in problems)
    elif module.check_mode:
        result["msg"] = "Check mode: no request was sent."
    else:
        progress = None
        try:
            params["ssl_context"] = client_context(params["validate_certs"], params["ca_path"])
            params["stop_when_slower"] = _stop_settings(params["stop_when_slower"])
            if params["progress_file"]:
                progress = ProgressWriter(params["progress_file"], planned_requests(params))
            result["results"], warnings = run_benchmark(params, progress)
        except BenchmarkAborted as exc:
            failure = str(exc)
            result["errors"] = exc.errors
        except (OSError, ValueError) as exc:
            failure = "Cannot run the benchmark: %s" % exc
        else:
            for warning in warnings:
                module.warn(warning)
            # A window's streams that its end cut streamed too.
            completed = sum(level["completed"] + level.get("cut_streams", 0) for level in result["results"])
            requested = sum(level["completed"] + level["failed"] for level in result["results"])
            result["msg"] = "Measured %d concurrency level%s; %d of %d requests succeeded." % (
                len(result["results"]),
                "" if len(result["results"]) == 1 else "s",
                completed,
                requested,
            )
            if params["stop_when_slower"] is not None:
                result.update(_stopped_early(result["results"], params["concurrency"]))
                if result["stopped_early"]:
                    result["msg"] += " Stopped early: %s." % result["stopped_early_reason"]
            if not completed:
                failure = "No request succeeded. %s" % result["msg"]
        if progress is not None:
            progress.finish()
            if progress.broken:
                module.warn("Progress was not written to %s after %s." % (params["progress_file"], progress.broken))

    if failure:
        result["msg"] = failure
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
