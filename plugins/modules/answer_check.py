#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: answer_check
short_description: Read a server's greedy answers to a few fixed requests, to check a variant against its baseline
version_added: 1.2.0
description:
  - Sends the first O(num_prompts) requests of a prompt set, one at a time and at temperature 0, to an
    OpenAI-compatible server (vLLM), reads each answer whole from its stream as a client does, and returns
    them, so that P(llmops.vllm.trial_decision#module) can compare a variant's answers with the baseline's.
  - Speculative decoding must not change what a model answers greedily, as drafts are kept only where the
    target model agrees; a variant whose answers differ beyond the engine's own nondeterminism is broken.
  - Each answer carries its text, how much reasoning the server's reasoning parser split off, every tool call
    assembled from its streamed deltas and checked against the schema of the tool it names (valid JSON, the
    required arguments, their types), and the finish reason.
  - The same O(seed) and O(prompt_set) give the same requests, on both sides of a trial. Whatever sampling the
    workload or a replayed request names is replaced with greedy decoding.
  - Uses only the Python standard library. Run it where the benchmark runs, with C(delegate_to).
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.vllm.tls_client
options:
  base_url:
    description: Root URL of the server, without C(/v1).
    type: str
    required: true
  model:
    description: The model name the server serves.
    type: str
    required: true
  api_key:
    description: Bearer token for the server, when it asks for one.
    type: str
  endpoint:
    description: V(completions) for C(/v1/completions), V(chat) for C(/v1/chat/completions).
    type: str
    choices: [completions, chat]
    default: completions
  prompt_set:
    description:
      - A built-in prompt set or a replay file, as for M(llmops.vllm.openai_benchmark); its first O(num_prompts)
        requests are sent.
    type: str
    default: novel_reasoning
  context_tokens:
    description: Pad each prompt to about this many tokens, as M(llmops.vllm.openai_benchmark) does.
    type: int
  chat_template_kwargs:
    description: Passed to the chat template (O(endpoint=chat)), for example C(thinking) for a reasoning model.
    type: dict
  tools:
    description: OpenAI-style tools for requests that declare none of their own (O(endpoint=chat)).
    type: list
    elements: dict
  tool_choice:
    description: Sent with the tools.
    type: str
    choices: [auto, none, required]
  num_prompts:
    description: How many requests to send.
    type: int
    default: 8
  max_tokens:
    description:
      - Longest answer per request. Greedy answers that agree this far agree; longer ones cost time and let the
        engine's own nondeterminism show.
    type: int
    default: 64
  seed:
    description: Seeds the built-in prompt sets.
    type: int
    default: 0
  timeout:
    description: Seconds one request may take from being sent to its last byte.
    type: float
    default: 600
  labels:
    description: Returned as they are, to say what was checked (model, variant, workload).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details: In check mode no request is sent.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - The answers' text is returned, for the comparison; the trial record keeps only where two answers differ.
seealso:
  - module: llmops.vllm.trial_decision
  - module: llmops.vllm.openai_benchmark
"""

EXAMPLES = r"""
- name: Read the baseline's greedy answers to the tool-call requests
  llmops.vllm.answer_check:
    base_url: http://gpu-node-01:8000
    model: kimi-k2.5
    endpoint: chat
    prompt_set: tool_calls
    chat_template_kwargs:
      thinking: true
    labels:
      variant: baseline
      workload: tool_calls_thinking
  delegate_to: localhost
  register: baseline_answers
"""

RETURN = r"""
answers:
  description: One answer per request, in the order sent.
  returned: unless in check mode
  type: list
  elements: dict
  contains:
    index:
      description: The request's place, from 0.
      type: int
    text:
      description: The answer's content, as streamed.
      type: str
    text_sha256:
      description: SHA-256 of RV(answers[].text).
      type: str
    reasoning_characters:
      description: Characters of reasoning that the server's reasoning parser split off (C(reasoning) deltas).
      type: int
    reasoning_sha256:
      description: SHA-256 of that reasoning, which the correctness gate compares with the text, tool calls and finish reason.
      type: str
      version_added: 1.2.0
    tool_calls:
      description: The tool calls assembled from the stream, each with C(name), C(arguments) (a string) and
        C(problem), what is wrong with it against the declared tool, or V(null) when it is valid.
      type: list
      elements: dict
    finish_reason:
      description: Why the answer ended (V(stop), V(length), V(tool_calls), ...).
      type: str
    completion_tokens:
      description: Output tokens, from the stream's C(usage); V(null) when the server sent none.
      type: int
  sample:
    - {index: 0, text: "", text_sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855,
       reasoning_characters: 812, finish_reason: tool_calls, completion_tokens: 58,
       tool_calls: [{name: check_stock, arguments: '{"site": "Leeds", "item": "pallets"}', problem: null}]}
prompt_set_sha256:
  description: SHA-256 of the requests sent, to tell that both sides were asked the same.
  returned: unless in check mode
  type: str
chat_template_kwargs:
  description: O(chat_template_kwargs) as sent, so that a comparison can say whether the answers were asked with thinking on.
  returned: unless in check mode
  type: dict
  version_added: 1.2.0
labels:
  description: O(labels), as given.
  returned: always
  type: dict
"""

import hashlib
import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils._answer_check import AnswerError, check_answers
from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_options import ARGUMENT_SPEC as BENCHMARK_SPEC
from ansible_collections.llmops.vllm.plugins.module_utils._load_generation import load_requests
from ansible_collections.llmops.vllm.plugins.module_utils._tls import client_context


# The request options mean what they mean to openai_benchmark, declared there once; only the counts differ.
_SHARED = ("base_url", "model", "api_key", "endpoint", "prompt_set", "context_tokens", "chat_template_kwargs", "tools",
           "tool_choice", "seed", "timeout", "labels", "validate_certs", "ca_path")
ARGUMENT_SPEC = dict((name, BENCHMARK_SPEC[name]) for name in _SHARED)
ARGUMENT_SPEC.update(
    num_prompts=dict(type="int", default=8),
    max_tokens=dict(type="int", default=64, no_log=False),
)


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    params = dict(module.params)
    result = dict(changed=False, labels=params["labels"])
    for name in ("num_prompts", "max_tokens"):
        if params[name] < 1:
            module.fail_json(msg="%s must be at least 1" % name, **result)
    if not 0 < params["timeout"] < float("inf"):
        module.fail_json(msg="timeout must be a positive number", **result)
    if module.check_mode:
        module.exit_json(msg="Check mode: no request was sent.", **result)
    params["base_url"] = params["base_url"].rstrip("/")
    params["ignore_eos"] = False
    try:
        params["ssl_context"] = client_context(params["validate_certs"], params["ca_path"])
        requests = load_requests(params["prompt_set"], params["num_prompts"], params["seed"], params["context_tokens"])
        answers = check_answers(params, requests)
    except AnswerError as exc:
        module.fail_json(msg=str(exc), **result)
    except (OSError, ValueError) as exc:
        module.fail_json(msg="Cannot check the answers: %s" % exc, **result)
    result["answers"] = answers
    result["prompt_set_sha256"] = hashlib.sha256(json.dumps(requests, sort_keys=True).encode("utf-8")).hexdigest()
    result["chat_template_kwargs"] = params["chat_template_kwargs"]
    result["msg"] = "Read %d greedy answers." % len(answers)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
