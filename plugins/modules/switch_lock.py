#!/usr/bin/python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: switch_lock
short_description: Hold a node's switch lock, so that one switch at a time changes what serves
version_added: 1.1.0
description:
  - Takes, or gives back, the lock that a switch holds on a vLLM node for as long as it may stop, start or
    benchmark the model's units. The lock is a file on the node that names its holder, that is the controller
    host, the user, the playbook, the start time, a run id and the PID of the C(ansible-playbook) process.
  - A second run finds the lock held and fails within seconds naming the holder, or waits up to O(wait)
    seconds for it.
  - A lock left by a run that was killed is stale, is reported as such and is taken over. A holder on this
    controller is stale as soon as its C(ansible-playbook) process is gone; a holder on another controller,
    which cannot be asked, after O(stale_after) seconds. A lock never blocks forever.
  - The decision runs on the controller (it needs the controller's processes); the node only creates, replaces
    and removes the file, each atomically, so two runs that start together cannot both take it.
author:
  - llmops.vllm maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode the lock is read and its holder reported; nothing is written and a held lock does not fail.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  path:
    description: The lock file on the node; its directory must exist.
    type: path
    required: true
  state:
    description: V(present) takes the lock (or keeps it, when this run holds it); V(absent) gives it back.
    type: str
    choices: [present, absent]
    default: present
  wait:
    description: Seconds to wait for a lock held by another live run before failing; V(0) fails at once.
    type: int
    default: 0
  stale_after:
    description: Seconds after which a lock held from another controller counts as left behind.
    type: int
    default: 14400
  poll:
    description: Seconds between two looks at a held lock while waiting.
    type: float
    default: 5
  op:
    description:
      - Set by the action plugin, which decides on the controller; not for playbooks. V(read) reads the holder,
        V(create) writes the lock only when there is none, V(replace) and V(remove) act only while the holder's run
        id is O(expected_run_id).
    type: str
    choices: [read, create, replace, remove]
    default: read
  holder:
    description: Set by the action plugin; the holder to write.
    type: dict
  expected_run_id:
    description: Set by the action plugin; the run id the lock must still name for V(replace) or V(remove).
    type: str
notes:
  - The llmops.vllm.vllm_switch role holds this lock for the whole of a switch and gives it back however the switch
    ends; its C(vllm_switch_lock_wait) and C(vllm_switch_lock_stale_after) set O(wait) and O(stale_after).
"""

EXAMPLES = r"""
- name: Take the node's switch lock, waiting up to ten minutes for another switch to finish
  llmops.vllm.switch_lock:
    path: /var/lib/vllm-switch/kimi-k2.5.lock
    wait: 600

- name: Give it back
  llmops.vllm.switch_lock:
    path: /var/lib/vllm-switch/kimi-k2.5.lock
    state: absent
"""

RETURN = r"""
holder:
  description: Who holds the lock now; V(null) after it was given back.
  returned: always
  type: dict
  sample: {"run_id": "3f2a9c1b...", "controller": "ctl-1", "user": "ops", "playbook": "deploy-ngram.yml",
           "started_at": "2026-12-01T02:00:00+00:00", "pid": 4242, "pid_started": "1234567"}
taken_over:
  description: The stale holder whose lock this run took over, and why it was stale.
  returned: when a stale lock was taken over
  type: dict
waited:
  description: Seconds spent waiting for another run's lock.
  returned: always
  type: float
written_at:
  description:
    - When the lock file was last written, by the node's clock; V(null) when there is no lock.
    - The age of a lock whose C(started_at) cannot be read, so that such a lock turns stale after O(stale_after) too.
  returned: when the lock was read
  type: str
  sample: "2026-12-01T02:00:00+00:00"
"""

import datetime
import errno
import fcntl
import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule


def read_holder(path):
    """The lock's holder, None when there is no lock, {} when the file holds no readable holder."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise
    try:
        holder = json.loads(text)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def written_at(path):
    """When the lock file was last written (UTC, ISO 8601), or None when there is none."""
    try:
        mtime = os.stat(path).st_mtime
    except (IOError, OSError):
        return None
    return datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc).isoformat(timespec="seconds")


def _write_new(path, holder):
    """Create the lock only if there is none: O_EXCL makes two simultaneous takers race for one file."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except (IOError, OSError) as exc:
        if exc.errno == errno.EEXIST:
            return False
        raise
    with os.fdopen(descriptor, "w") as handle:
        handle.write(json.dumps(holder, sort_keys=True))
        handle.flush()
        os.fsync(handle.fileno())
    return True


def _replace(path, holder):
    descriptor, temporary = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".switch-lock.")
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(json.dumps(holder, sort_keys=True))
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


class _Guard:
    """Serialises the compare-and-swap steps (take over, give back) of every run on this node."""

    def __init__(self, path):
        self._path = path + ".guard"

    def __enter__(self):
        self._handle = open(self._path, "a")
        fcntl.flock(self._handle, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc_info):
        fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            op=dict(type="str", default="read", choices=["read", "create", "replace", "remove"]),
            holder=dict(type="dict"),
            expected_run_id=dict(type="str", no_log=False),
            # The action plugin's options, documented with the module's: the action validates them and runs this
            # module with op alone, so they never reach the node.
            state=dict(type="str", default="present", choices=["present", "absent"]),
            wait=dict(type="int", default=0),
            stale_after=dict(type="int", default=14400),
            poll=dict(type="float", default=5),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    op = module.params["op"]
    result = dict(changed=False, done=False)
    try:
        if op == "read" or module.check_mode:
            result["holder"] = read_holder(path)
            result["written_at"] = written_at(path)
        elif op == "create":
            result["done"] = _write_new(path, module.params["holder"])
            result["changed"] = result["done"]
            result["holder"] = module.params["holder"] if result["done"] else read_holder(path)
        else:
            with _Guard(path):
                current = read_holder(path)
                # A file without a readable holder matches the empty run id the caller expects for it.
                current_run = None if current is None else (current.get("run_id") or "")
                if current_run == module.params["expected_run_id"]:
                    if op == "replace":
                        _replace(path, module.params["holder"])
                        current = module.params["holder"]
                    else:
                        os.unlink(path)
                        current = None
                    result["done"] = result["changed"] = True
                result["holder"] = current
    except (IOError, OSError) as exc:
        module.fail_json(msg="Cannot use the switch lock %s: %s" % (path, exc), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
