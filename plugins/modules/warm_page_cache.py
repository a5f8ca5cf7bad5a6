#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: warm_page_cache
short_description: Read a model's weights into the page cache before the unit that loads them starts
version_added: 1.1.0
description:
  - Reads the files of a model directory and of a draft's directory once, front to back, so that they sit in
    the kernel's page cache when vLLM loads them. A load that reads the page cache is bound by memory, not by
    the disk; done while the running server still serves, the read leaves the GPUs' idle window.
  - The files directly in each directory are read (a hub snapshot's symbolic links are resolved to their
    blobs, and a blob two entries point at is read once); subdirectories are not, nor PyTorch C(.bin),
    C(.pt) or C(.pth) files beside safetensors ones, since vLLM loads neither.
  - Reads only when the files fit in C(MemAvailable) of C(/proc/meminfo) less O(reserve_mib); otherwise it
    reads nothing and says both figures. Larger weights would evict their own first files and squeeze the
    running server.
  - Runs at the idle I/O class (C(ioprio_set), where the kernel and architecture offer it) and at nice 19, so
    that the serving process's disk and CPU come first.
  - Neither a skip nor a timeout is a failure. The module never reports a change, since the page cache is no
    state of the host that anything depends on.
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode the sizes and the memory check are computed and reported; nothing is read.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  paths:
    description:
      - The directories of the weights (a model directory, a draft's directory, a hub snapshot directory),
        or single files.
    type: list
    elements: path
    required: true
  reserve_mib:
    description: Memory in MiB that must stay available after the weights are cached.
    type: int
    default: 16384
  timeout:
    description: Seconds the read may take at most; the read stops when they are spent and says how far it got.
    type: int
    default: 1800
notes:
  - C(MemAvailable) counts page cache the kernel may drop, files already cached included, so weights read by an
    earlier run still fit.
seealso:
  - module: llmops.vllm.verify_weights
"""

EXAMPLES = r"""
- name: Read the target's weights into the page cache while the baseline serves
  llmops.vllm.warm_page_cache:
    paths:
      - /srv/models/moonshotai/Kimi-K2.5
      - /var/lib/vllm/.cache/huggingface/hub/models--lightseekorg--kimi-k2.5-eagle3/snapshots/5f1c2a0e4b7d9a3c6e8f0b1d2c4e6a8b0c2d4e6f
    reserve_mib: 16384
    timeout: 1800
  register: prefetch

- name: Say what it did
  ansible.builtin.debug:
    msg: "{{ prefetch.msg }}"
"""

RETURN = r"""
bytes:
  description: The files' total size.
  returned: always
  type: int
  sample: 594920000000
files:
  description: How many files there are, each blob counted once.
  returned: always
  type: int
  sample: 66
bytes_read:
  description: How much was read; V(0) when they do not fit or in check mode, less than RV(bytes) after a timeout.
  returned: always
  type: int
  sample: 594920000000
seconds:
  description: How long the read took.
  returned: always
  type: float
  sample: 912.4
fits:
  description:
    - Whether the files fit in the available memory less the reserve. When they do not, nothing is read and
      RV(msg) gives both figures.
  returned: always
  type: bool
  sample: true
mem_available:
  description: C(MemAvailable) of C(/proc/meminfo) before the read, in bytes.
  returned: always
  type: int
  sample: 1649267441664
msg:
  description: One sentence for the operator, with the figures.
  returned: always
  type: str
  sample: read 66 files, 594.9 GB into the page cache in 912.4 s at idle I/O priority and nice 19
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils._page_cache import PageCacheError, warm


def main():
    module = AnsibleModule(
        argument_spec=dict(
            paths=dict(type='list', elements='path', required=True),
            reserve_mib=dict(type='int', default=16384),
            timeout=dict(type='int', default=1800),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not params['paths']:
        module.fail_json(msg='paths: must name at least one directory or file')
    if params['reserve_mib'] < 0:
        module.fail_json(msg='reserve_mib: must be 0 or more, got %d' % params['reserve_mib'])
    if params['timeout'] < 1:
        module.fail_json(msg='timeout: must be at least 1 second, got %d' % params['timeout'])
    try:
        result = warm(params['paths'], params['reserve_mib'], params['timeout'], check_mode=module.check_mode)
    except PageCacheError as exc:
        module.fail_json(msg='the weights cannot be read into the page cache: %s' % exc)
    # Never a change: what sits in the page cache is no state of the host that anything relies on, the kernel
    # drops it as it likes, and a rerun reads the same files again.
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
