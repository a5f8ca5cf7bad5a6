#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_args_check
short_description: Have vLLM, in a unit's own venv, judge the unit's arguments without starting an engine
version_added: 1.1.0
description:
  - Runs the venv's Python from the unit's command line on a short script that hands the unit's arguments to
    vLLM's own C(vllm serve) argument parser, runs vLLM's checks of the serve arguments, and builds vLLM's engine
    configuration, speculative configuration included. No engine starts, no weights load, and no port opens.
  - What vLLM refuses while it builds its configuration it would refuse at start, after the baseline had
    stopped. That includes a speculative method whose package the venv lacks (C(suffix) without
    C(arctic-inference)), C(mtp) on a model without MTP layers, a draft whose config does not fit the model, a
    context longer than the model's and a flag this release does not know. The switch role runs this while the
    baseline still serves.
  - The script runs as the unit would, as O(user) and O(group), with the environment of O(environment_files)
    read as systemd reads them. Their values are not returned.
  - Fails when vLLM refuses, with its exception and message, or when the check itself cannot run.
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The check only reads; it runs the same in check mode, and remembers nothing in O(cache_dir) then.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  argv:
    description:
      - The unit's command line, as the C(vllm_service) role renders it (a variant spec's C(argv)) - the venv's
        Python, C(-m), C(vllm.entrypoints.openai.api_server), then vLLM's arguments.
    type: list
    elements: str
    required: true
  environment_files:
    description:
      - The unit's C(EnvironmentFile=) paths, in order; a leading C(-) marks one that may be missing, as in the
        unit.
    type: list
    elements: str
    default: []
  user:
    description: The unit's C(User=); unset runs as the module's own user.
    type: str
  group:
    description: The unit's C(Group=); unset uses O(user)'s group.
    type: str
  supplementary_groups:
    description: The unit's C(SupplementaryGroups=).
    type: list
    elements: str
    default: []
  working_directory:
    description: The unit's C(WorkingDirectory=).
    type: path
    default: /
  timeout:
    description: Seconds for vLLM to answer (importing vLLM takes some; a hub-hosted draft's config is fetched).
    type: int
    default: 600
  name:
    description: What the arguments are, for the messages, for example the unit's name.
    type: str
    default: the unit
  cache_dir:
    description:
      - A directory on the node where accepted arguments are remembered. A check whose command line, environment,
        user, working directory, venv distributions and model, tokenizer and draft configuration files are all
        the same as those of an accepted one is answered from there, without importing vLLM again.
      - Only acceptances are kept, so a refusal is always checked again. A model or draft named by its hub id
        is always checked, as the hub's copy may change.
      - Unset, every check runs vLLM.
    type: path
    version_added: 1.2.0
seealso:
  - module: llmops.vllm.verify_weights
  - module: llmops.vllm.wait_for_openai_endpoint
"""

EXAMPLES = r"""
- name: Let vLLM judge the target's arguments before the baseline stops
  llmops.vllm.engine_args_check:
    argv: "{{ vllm_service_specs.ngram.argv }}"
    environment_files:
      - /etc/vllm/kimi-k2.5-ngram.env
      - -/etc/vllm/kimi-k2.5.secrets.env
    user: vllm
    group: vllm
    name: vllm-kimi-k2.5-ngram.service
    cache_dir: /var/lib/vllm-switch/kimi-k2.5/accepted-engine-args
"""

RETURN = r"""
accepted:
  description: Whether vLLM built its configuration from the arguments. A refusal fails the task.
  returned: always
  type: bool
refusal:
  description: vLLM's exception and message, and at which stage it refused; null when accepted.
  returned: always
  type: str
  sample: "ImportError while building the engine configuration: Arctic Inference is required for suffix decoding."
stage:
  description: >-
    How far vLLM got - V(done), or where it refused (V(parse), V(validate), V(engine_config)) or failed to load
    (V(import)).
  returned: when vLLM answered
  type: str
speculative_method:
  description: The speculative method of the configuration vLLM built; null without one.
  returned: when accepted
  type: str
num_speculative_tokens:
  description: The draft length of that configuration.
  returned: when accepted
  type: int
max_model_len:
  description: The context length vLLM settled on.
  returned: when accepted
  type: int
cached:
  description: Whether the answer came from O(cache_dir), an earlier acceptance of the same arguments.
  returned: always
  type: bool
  version_added: 1.2.0
elapsed:
  description: Seconds the check took, most of them importing vLLM.
  returned: always
  type: float
log_tail:
  description: The last lines of vLLM's log during the check.
  returned: always
  type: list
  elements: str
msg:
  description: One sentence for the operator.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils._engine_args import (
    EngineArgsError, proof_key, read_accepted, refusal_text, run_proof, unit_environment, write_accepted)

# What systemd gives a service before its EnvironmentFile= lines.
SERVICE_ENVIRONMENT = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            argv=dict(type='list', elements='str', required=True),
            environment_files=dict(type='list', elements='str', default=[]),
            user=dict(type='str'),
            group=dict(type='str'),
            supplementary_groups=dict(type='list', elements='str', default=[]),
            working_directory=dict(type='path', default='/'),
            timeout=dict(type='int', default=600),
            name=dict(type='str', default='the unit'),
            cache_dir=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    name = params['name']
    result = dict(changed=False, accepted=False, cached=False, refusal=None, elapsed=0.0, log_tail=[])
    if params['timeout'] <= 0:
        module.fail_json(msg='timeout must be positive, got %d' % params['timeout'], **result)
    who = dict(user=params['user'], group=params['group'], supplementary_groups=params['supplementary_groups'],
               cwd=params['working_directory'])
    try:
        environment = unit_environment(params['environment_files'], SERVICE_ENVIRONMENT)
        key = proof_key(params['argv'], environment, **who) if params['cache_dir'] else None
        answer = read_accepted(params['cache_dir'], key) if key else None
        if answer:
            result.update(cached=True, stage=answer['stage'])
            accepted(module, name, answer, result)
        proof = run_proof(params['argv'], environment, params['timeout'], **who)
    except (EngineArgsError, OSError) as exc:
        module.fail_json(msg='Could not have vLLM check the arguments of %s: %s' % (name, exc), **result)
    answer = proof['answer']
    result.update(elapsed=proof['elapsed'], log_tail=proof['log_tail'], stage=answer.get('stage'))
    if not proof['accepted']:
        result['refusal'] = refusal_text(answer)
        module.fail_json(msg='vLLM refuses the arguments of %s: %s' % (name, result['refusal']), **result)
    if key and not module.check_mode:
        try:
            write_accepted(params['cache_dir'], key, answer)
        except OSError as exc:
            module.warn('Could not remember the accepted arguments of %s in %s: %s' % (name, params['cache_dir'], exc))
    accepted(module, name, answer, result)


def accepted(module, name, answer, result):
    """Exit with vLLM's acceptance, as it answered now or earlier."""
    result.update(accepted=True, speculative_method=answer.get('speculative_method'),
                  num_speculative_tokens=answer.get('num_speculative_tokens'),
                  max_model_len=answer.get('max_model_len'))
    method = answer.get('speculative_method')
    when = 'as it did before (same arguments, venv and model configuration)' if result['cached'] else (
        'in %.1f s' % result['elapsed'])
    module.exit_json(msg='vLLM accepts the arguments of %s (%s, max_model_len %s) %s' % (
        name, ('speculative method %s' % method) if method else 'no speculative decoding',
        answer.get('max_model_len'), when), **result)


if __name__ == '__main__':
    main()
