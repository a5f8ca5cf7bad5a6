# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Which ansible-playbook run this is, as every action plugin of the run sees it: the switch lock's holder and the
run that the results store files each result under."""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import socket


def process_started(pid):
    """The start time of a process (clock ticks since boot), which tells a PID's reuse apart; None if gone."""
    try:
        with open(f'/proc/{pid}/stat', encoding='utf-8') as handle:
            # The command name may hold spaces and parentheses: fields are counted after its closing one.
            return handle.read().rsplit(')', 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def process_alive(pid, started):
    now = process_started(pid)
    return now is not None and (started is None or str(started) == now)


# A playbook called by its FQCN from an installed collection (llmops.vllm.switch_variant).
_PLAYBOOK_FQCN = re.compile(r'^[a-z0-9_]+\.[a-z0-9_]+\.[a-z0-9_]+$')


def playbooks_of(argv):
    """The playbooks an ansible-playbook command line runs, by file name or FQCN; None when it names none."""
    # Not an extra-vars file (@vars.yml), which ends like a playbook.
    return ' '.join(os.path.basename(word) for word in argv if not word.startswith('@')
                    and (word.endswith(('.yml', '.yaml')) or _PLAYBOOK_FQCN.match(word))) or None


def _playbooks(pid):
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as handle:
            words = handle.read().decode('utf-8', 'replace').split('\x00')
    except OSError:
        return None
    return playbooks_of(words[1:])


def controller_identity(now):
    """Who this run is. The run id is fixed by the ansible-playbook process, so every task of one run agrees."""
    # Action plugins run in worker processes forked from ansible-playbook itself.
    pid = os.getppid()
    started = process_started(pid)
    controller = socket.getfqdn()
    run_id = hashlib.sha256(f'{controller}:{pid}:{started}'.encode()).hexdigest()[:32]
    return {'run_id': run_id, 'controller': controller, 'user': getpass.getuser(), 'playbook': _playbooks(pid),
            'started_at': now.isoformat(timespec='seconds'), 'pid': pid, 'pid_started': started}
