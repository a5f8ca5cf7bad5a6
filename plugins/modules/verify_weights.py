#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: verify_weights
short_description: Check that a model's weights are all on the node, before anything stops
version_added: 1.1.0
description:
  - Finds a model or draft on the node, by its directory or by its hub repository and revision in a Hugging Face
    hub cache (as C(HF_HUB_OFFLINE=1) makes vLLM find it), and checks it against the index the weights carry.
  - A sharded checkpoint's C(model.safetensors.index.json) names every shard and its tensors; each safetensors
    file's own header gives the exact size the file must have. A missing shard, a shard cut short by an
    interrupted download or a shard of another revision fails, without hashing the weights and without the
    network.
  - Fails with what is missing and where it was looked for.
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The check only reads; it runs the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  path:
    description: The model's directory on the node. Mutually exclusive with O(repo_id).
    type: path
  repo_id:
    description: The model's hub repository (C(org/name)), looked up in O(hub_cache).
    type: str
  revision:
    description: The branch, tag or commit of O(repo_id); V(main) when not set.
    type: str
  hub_cache:
    description: The hub cache that holds O(repo_id) (C($HF_HOME/hub)).
    type: path
  what:
    description: What the weights are, for the messages, for example V(the draft of eagle3).
    type: str
    default: the model
seealso:
  - module: llmops.vllm.wait_for_gpu_memory
"""

EXAMPLES = r"""
- name: Check the draft of eagle3 before the baseline stops
  llmops.vllm.verify_weights:
    repo_id: lightseekorg/kimi-k2.5-eagle3
    revision: 5f1c2a0e4b7d9a3c6e8f0b1d2c4e6a8b0c2d4e6f
    hub_cache: /var/lib/vllm/.cache/huggingface/hub
    what: the draft of eagle3

- name: Check a model in a directory
  llmops.vllm.verify_weights:
    path: /srv/models/moonshotai/Kimi-K2.5
"""

RETURN = r"""
path:
  description: The directory that was checked (for a hub model, its snapshot).
  returned: always
  type: str
  sample: /var/lib/vllm/.cache/huggingface/hub/models--org--name/snapshots/5f1c2a0e4b7d9a3c6e8f0b1d2c4e6a8b0c2d4e6f
files:
  description: Every weight file, with its size in bytes.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "model-00001-of-00064.safetensors", "size": 9663676416}]
bytes:
  description: The weight files' total size.
  returned: always
  type: int
problems:
  description: What is missing, short or inconsistent; empty when the weights are whole.
  returned: always
  type: list
  elements: str
msg:
  description: One sentence for the operator.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils._weights import WeightsError, check_weights, hub_snapshot


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path'),
            repo_id=dict(type='str'),
            revision=dict(type='str'),
            hub_cache=dict(type='path'),
            what=dict(type='str', default='the model'),
        ),
        mutually_exclusive=[('path', 'repo_id')],
        required_one_of=[('path', 'repo_id')],
        required_by={'repo_id': 'hub_cache'},
        supports_check_mode=True,
    )
    what = module.params['what']
    directory = module.params['path']
    if directory is None:
        try:
            directory = hub_snapshot(module.params['hub_cache'], module.params['repo_id'], module.params['revision'])
        except WeightsError as exc:
            module.fail_json(msg='%s is not on the node: %s' % (what, exc), path=None, files=[], bytes=0,
                             problems=[str(exc)])
    files, problems = check_weights(directory)
    total = sum(entry['size'] for entry in files)
    result = dict(changed=False, path=directory, files=files, bytes=total, problems=problems)
    if problems:
        module.fail_json(msg='%s is not whole on the node: %s' % (what, '; '.join(problems)), **result)
    module.exit_json(msg='%s is whole: %d weight file%s, %s, in %s' % (
        what, len(files), '' if len(files) == 1 else 's', _size_text(total), directory), **result)


def _size_text(size):
    return '%.1f GB' % (size / 1e9) if size >= 1e9 else '%.1f MB' % (size / 1e6)


if __name__ == '__main__':
    main()
