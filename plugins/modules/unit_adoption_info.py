#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: unit_adoption_info
short_description: Read a hand-made vLLM unit and say whether the collection's baseline can take it over as it runs
version_added: 1.1.0
description:
  - Reads a running systemd unit that serves vLLM but that this collection did not write, with C(systemctl show)
    and C(systemctl cat) (the unit file and its drop-ins, merged as systemd merges them), and the files its
    C(EnvironmentFile=) settings name.
  - Splits its C(ExecStart=) by systemd's rules for command lines (quotes, C escapes, V(%%) and V($$), V($NAME) and
    V(${NAME}) from the unit's environment) and reads it as a vLLM server, C(<venv>/bin/vllm serve MODEL ...) or
    C(<venv>/bin/python -m vllm.entrypoints.openai.api_server --model MODEL ...). Any other program is refused.
  - Returns the collection's variables that describe it (RV(spec)), what the unit means differently from what it
    says (RV(problems); for example a V($free) in an C(ExecStartPre=) shell script, which systemd replaces with an
    empty string before the shell runs), and the diff between the unit as it runs and O(rendered_unit).
  - Compares it with O(expected), the collection's baseline. The two are B(equivalent) when they run the same server
    (the same venv, model, served name, host, port, serve args and speculative config, compared as vLLM parses its
    flags, so flag order, V(--flag=value) against V(--flag value), V(vllm serve) against the module form and V(8)
    against V("8") do not matter; a left-out host, port or served name is vLLM's default, any other left-out flag
    differs), with the same environment (from C(Environment=) and C(EnvironmentFile=), secrets included, whose
    values are compared and never returned), as the same user and group, from a venv that holds O(version). The
    main process must also hold the environment that the unit's files declare now (read from
    C(/proc/<pid>/environ)), which tells a file edited since the start. C(ExecStartPre=), sandboxing, restart
    policy and timeouts are not part of it; they act only at the next start.
  - RV(action) says what the adoption does, decided here. V(none) when the unit file already is O(rendered_unit)
    and equivalent; V(take_over) (write the unit, reload systemd, no restart) when equivalent; V(restart) when not equivalent and
    O(restart) is set; V(refuse) otherwise, and RV(reason) says why and how to go on.
  - Fails, before anything changes, when the unit is not loaded, is not running, is an alias, or does not run a
    vLLM server; and, when O(expected) is set, when it runs as root (C(User=root), or no C(User=) and no
    C(DynamicUser=yes)). The collection runs vLLM only as a non-root O(user) and never changes an existing account,
    so such a unit is neither taken over nor restarted, whatever O(restart) says.
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: The module only reads; check mode runs it as usual.
  diff_mode:
    support: full
    details: Returns the running unit (C(systemctl cat)) as C(before) and O(rendered_unit) as C(after).
  platform:
    platforms: posix
options:
  unit:
    description:
      - The running unit to read, for example V(vllm-kimi-k25-int4.service). It must end in V(.service) and be made
        of letters, digits and V(_.:-).
    type: str
    required: true
  expected:
    description:
      - The collection's baseline as the C(llmops.vllm.variant_specs) filter resolves it. Its C(argv) and
        C(environment) are compared; other keys are ignored.
      - Not compared when not set; RV(equivalent) and RV(action) are then V(null).
    type: dict
  secret_environment:
    description:
      - The secret environment the collection's unit would have (C(vllm_secret_environment)). Compared with the
        running unit's, value for value; no value is ever returned.
    type: dict
    default: {}
  user:
    description: The account the collection's unit runs as (C(vllm_user)). Not compared when not set.
    type: str
  group:
    description: The group the collection's unit runs as (C(vllm_group)). Not compared when not set.
    type: str
  version:
    description:
      - The vLLM release the inventory names (C(vllm_version)). When the running unit's venv holds another
        release, they are not equivalent, since the collection would install this one there.
    type: str
  rendered_unit:
    description:
      - The text of the unit the collection would write. Diffed against the running unit; when the unit file
        already holds exactly this text and there are no drop-ins, RV(action) is V(none).
    type: str
  restart:
    description:
      - Whether a unit that is not equivalent may be restarted into the collection's unit (C(vllm_adopt_restart)).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Read the hand-made unit and compare it with the collection's baseline
  llmops.vllm.unit_adoption_info:
    unit: vllm-kimi-k25-int4.service
    expected: "{{ vllm_service_specs[vllm_baseline_variant] }}"
    secret_environment: "{{ vllm_secret_environment }}"
    user: "{{ vllm_user }}"
    group: "{{ vllm_group }}"
    version: "{{ vllm_version }}"
    rendered_unit: "{{ lookup('ansible.builtin.file', '/tmp/units/node1/vllm-kimi-k25-int4.service') }}"
  register: adoption

- name: Print the inventory lines that describe it
  ansible.builtin.debug:
    msg: "{{ adoption.spec | ansible.builtin.to_nice_yaml(sort_keys=false) }}"
"""

RETURN = r"""
unit:
  description: The unit read.
  returned: always
  type: str
  sample: vllm-kimi-k25-int4.service
main_pid:
  description: The unit's main process when it was read.
  returned: success
  type: int
  sample: 48211
fragment_path:
  description: The unit file.
  returned: success
  type: str
  sample: /etc/systemd/system/vllm-kimi-k25-int4.service
drop_ins:
  description: The unit's drop-in files, in the order systemd applies them.
  returned: success
  type: list
  elements: str
  sample: [/etc/systemd/system/vllm-kimi-k25-int4.service.d/override.conf]
argv:
  description: The command systemd runs for C(ExecStart=), after its quoting, V($$), V(%%) and variables.
  returned: success
  type: list
  elements: str
  sample: [/opt/vllm/venv/bin/vllm, serve, /models/kimi, --tensor-parallel-size, "8"]
environment:
  description: The unit's environment (C(Environment=), then C(EnvironmentFile=) contents); secret values read V((secret)).
  returned: success
  type: dict
  sample: {NCCL_P2P_DISABLE: "1", HF_TOKEN: (secret)}
installed_version:
  description: The vLLM release in the unit's venv, from its package metadata, or V(null) when none was found.
  returned: success
  type: str
  sample: 0.32.0
problems:
  description:
    - What the unit means differently from what it says, one entry per setting and name.
    - C(severity) is V(error) for a V($NAME) that systemd replaces although a shell in the same line assigns it or
      the unit's environment does not set it, and for a V(%X) that is no specifier; V(warning) for a specifier.
  returned: success
  type: list
  elements: dict
  sample:
    - setting: ExecStartPre
      where: /etc/systemd/system/vllm-kimi-k25-int4.service line 8
      severity: error
      variable: free
      message: >-
        ExecStartPre= at /etc/systemd/system/vllm-kimi-k25-int4.service line 8: systemd replaces $free with an
        empty string before the command runs (the shell script in this line assigns free itself), so the command
        never sees it
      fix: write $$free (systemd turns $$ into one literal $)
spec:
  description:
    - The collection's variables that describe the running unit as its baseline, to paste into the inventory.
      Secrets appear as vault references only.
  returned: success
  type: dict
  sample:
    vllm_baseline_unit_name: vllm-kimi-k25-int4.service
    vllm_model: {name: kimi-k25-int4, path: /models/kimi, served_name: kimi-k2.5}
    vllm_host: 0.0.0.0
    vllm_port: 8000
    vllm_venv: /opt/vllm/venv
    vllm_serve_args: {tensor_parallel_size: 8}
    vllm_environment: {NCCL_P2P_DISABLE: "1"}
equivalent:
  description: Whether the running unit and O(expected) run the same server (see the description), or V(null).
  returned: success
  type: bool
  sample: true
differences:
  description: What makes them not equivalent, one entry per setting, each with a C(message); secrets read V((secret)).
  returned: success
  type: list
  elements: dict
  sample:
    - setting: serve_args.max_model_len
      running: 131072
      collection: 262144
      message: "--max-model-len: the running unit has 131072, the collection's 262144"
already_adopted:
  description: Whether the unit file already holds O(rendered_unit), with no drop-ins.
  returned: success
  type: bool
  sample: false
action:
  description: V(none), V(take_over), V(restart) or V(refuse), or V(null) without O(expected).
  returned: success
  type: str
  sample: take_over
reason:
  description: Why, in one sentence that the playbook prints and records.
  returned: success
  type: str
  sample: >-
    vllm-kimi-k25-int4.service runs the same server as the collection's baseline (same argv, environment and
    account): its file is replaced and systemd reloaded, without a restart
unit_diff:
  description:
    - Unified diff from the running unit (as C(systemctl cat) prints it, without the unit file's own path line) to
      O(rendered_unit), or empty.
  returned: success
  type: str
"""

import difflib

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils._unit_adoption import (
    SECRET_NAME,
    AdoptionError,
    compare,
    decide,
    inventory_spec,
    parse_process_environment,
    read_unit,
    root_refusal,
    stale_environment,
    unit_name_problem,
    venv_release,
)
from ansible_collections.llmops.vllm.plugins.module_utils._systemd_unit import parse_show


def _read_file(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _process_environment(pid):
    """The main process's environment as it started, or None where it cannot be read (then files are trusted)."""
    if not pid:
        return None
    try:
        with open("/proc/%d/environ" % pid, "rb") as handle:
            return parse_process_environment(handle.read())
    except OSError:
        return None


def _systemctl(module, systemctl, *args):
    rc, out, err = module.run_command([systemctl] + list(args))
    if rc != 0:
        module.fail_json(msg="systemctl %s failed (rc %d): %s" % (" ".join(args), rc, (err or out).strip()),
                         unit=module.params["unit"])
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", required=True),
            expected=dict(type="dict"),
            secret_environment=dict(type="dict", default={}, no_log=True),
            user=dict(type="str"),
            group=dict(type="str"),
            version=dict(type="str"),
            rendered_unit=dict(type="str"),
            restart=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    name = params["unit"]
    problem = unit_name_problem(name)
    if problem:
        module.fail_json(msg=problem, unit=name)
    systemctl = module.get_bin_path("systemctl", required=True)
    state = parse_show(_systemctl(module, systemctl, "show", name, "--property=Id,LoadState,ActiveState,SubState,"
                                                                   "MainPID,FragmentPath"))
    if state.get("LoadState") != "loaded":
        module.fail_json(msg="vllm_baseline_unit_name: %s is not a unit of this node (LoadState=%s); name the "
                             "running hand-made unit, as `systemctl list-units 'vllm*'` shows it"
                             % (name, state.get("LoadState") or "unknown"), unit=name)
    if state.get("Id") and state["Id"] != name:
        module.fail_json(msg="vllm_baseline_unit_name: %s is an alias of %s; name the unit itself"
                             % (name, state["Id"]), unit=name)
    if state.get("ActiveState") != "active":
        module.fail_json(msg="vllm_baseline_unit_name: %s is %s (%s), not running; adoption takes over a serving "
                             "unit only: start it (systemctl start %s), wait until it serves, and run again"
                             % (name, state.get("ActiveState"), state.get("SubState"), name), unit=name)
    cat_text = _systemctl(module, systemctl, "cat", name)
    try:
        unit = read_unit(cat_text, _read_file)
    except AdoptionError as exc:
        module.fail_json(msg="vllm_baseline_unit_name: %s cannot be adopted: %s" % (name, exc), unit=name)
    package, installed = venv_release(unit["server"]["venv"])
    result = dict(
        changed=False,
        unit=name,
        main_pid=int(state.get("MainPID") or 0) or None,
        fragment_path=unit["fragment_path"],
        drop_ins=unit["drop_ins"],
        argv=unit["argv"],
        environment=dict((key, "(secret)" if SECRET_NAME.search(key) else value)
                         for key, value in unit["environment"].items()),
        environment_files=unit["environment_files"],
        user=unit["user"],
        group=unit["group"],
        installed_package=package,
        installed_version=installed,
        problems=unit["problems"],
        spec=inventory_spec(name, unit, installed),
        equivalent=None,
        differences=[],
        already_adopted=False,
        action=None,
        reason=None,
        unit_diff="",
    )
    rendered = params["rendered_unit"]
    if rendered is not None:
        try:
            on_disk = _read_file(unit["fragment_path"])
        except OSError:
            on_disk = None
        result["already_adopted"] = (not unit["drop_ins"] and on_disk is not None
                                     and on_disk.rstrip() == rendered.rstrip())
        # The fragment's own "# <path>" line is systemctl's, not the file's; drop-ins keep theirs, to show where
        # each part comes from.
        running_text = cat_text.split("\n", 1)[1] if cat_text.startswith("# /") and "\n" in cat_text else cat_text
        running_text = running_text if running_text.endswith("\n") else running_text + "\n"
        rendered_text = rendered if rendered.endswith("\n") else rendered + "\n"
        result["unit_diff"] = "".join(difflib.unified_diff(
            running_text.splitlines(True), rendered_text.splitlines(True),
            "%s (running, systemctl cat)" % name, "%s (the collection's)" % name))
        if module._diff:
            result["diff"] = dict(before=running_text, after=rendered_text,
                                  before_header="%s (running)" % name, after_header="%s (the collection's)" % name)
    expected = params["expected"]
    if expected is not None:
        refusal = root_refusal(name, unit)
        if refusal:
            module.fail_json(msg=refusal, unit=name, user=unit["user"])
        if not isinstance(expected.get("argv"), list) or not isinstance(expected.get("environment") or {}, dict):
            module.fail_json(msg="expected: must be a variant spec with argv (a list) and environment (a dict), as "
                                 "the llmops.vllm.variant_specs filter returns it", unit=name)
        environment = dict(expected.get("environment") or {})
        environment.update(params["secret_environment"])
        differences = compare(unit, expected["argv"], environment, params["user"], params["group"])[1]
        process = _process_environment(result["main_pid"])
        if process is not None:
            differences.extend(stale_environment(unit["environment"], process))
        if params["version"] and installed and installed != params["version"]:
            differences.append({"setting": "vllm_version", "running": installed, "collection": params["version"],
                                "message": "the venv %s holds vLLM %s, the inventory says %s, which the collection "
                                           "would install there" % (unit["server"]["venv"], installed,
                                                                    params["version"])})
        equivalent = not differences
        action, reason = decide(name, equivalent, differences, params["restart"], result["already_adopted"])
        result.update(equivalent=equivalent, differences=differences, action=action, reason=reason)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
