# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Who may switch a node: the holder of its switch lock, and when a lock left behind is stale.

A lock names its holder: the controller host, the user, the playbook, when it started, a run id,
and the PID (with its start time) of the ansible-playbook process that took it. A holder on the
same controller whose process is gone (or whose PID now belongs to another process) was killed:
its lock is stale at once. A holder on another controller cannot be asked, so its lock is stale
only after ``stale_after`` seconds, a bound longer than any switch takes.
"""

from __future__ import annotations

import datetime
import typing as t
from collections.abc import Mapping

MINE = 'mine'
FREE = 'free'
HELD = 'held'
STALE = 'stale'


def lock_verdict(holder: Mapping[str, t.Any] | None, me: Mapping[str, t.Any], now: datetime.datetime,
                 process_alive: t.Callable[[int, t.Any], bool], stale_after: float,
                 written_at: t.Any = None) -> dict[str, t.Any]:
    """free, mine, held or stale, with the reason in words.

    holder is the node's lock (None when there is none), me the holder this run would write;
    process_alive(pid, pid_started) says whether that process of this controller still runs.
    written_at is when the lock file was last written, as the node's clock says: the age of a lock
    whose started_at cannot be read, so that no lock blocks forever.
    """
    if holder is None:
        return {'verdict': FREE, 'reason': 'no switch holds the node'}
    if not isinstance(holder, Mapping) or not holder.get('run_id'):
        # A lock nobody can name was not written by a complete run of this collection: never wait on it.
        return {'verdict': STALE, 'reason': 'the lock file names no holder (it was cut short while written)'}
    if holder.get('run_id') == me.get('run_id'):
        return {'verdict': MINE, 'reason': 'this run holds the lock'}
    who = describe(holder)
    age = _age_seconds(holder.get('started_at'), now)
    if age is None:
        age = _age_seconds(written_at, now)
    if holder.get('controller') == me.get('controller') and isinstance(holder.get('pid'), int):
        if not process_alive(holder['pid'], holder.get('pid_started')):
            return {'verdict': STALE, 'reason': 'held by %s, whose ansible-playbook (PID %d) no longer runs on this '
                                                'controller' % (who, holder['pid'])}
        return {'verdict': HELD, 'reason': 'held by %s, still running as PID %d' % (who, holder['pid'])}
    if age is not None and age > stale_after:
        return {'verdict': STALE, 'reason': 'held by %s for %d s, longer than any switch takes (stale after %d s)'
                                            % (who, age, stale_after)}
    return {'verdict': HELD, 'reason': 'held by %s' % who}


def describe(holder: Mapping[str, t.Any]) -> str:
    """'ops@ctl-1 (playbook deploy-ngram.yml, since 2026-12-01T02:00:00+00:00, run 3f2a9c1b)'."""
    return '%s@%s (playbook %s, since %s, run %s)' % (
        holder.get('user') or '?', holder.get('controller') or '?', holder.get('playbook') or '?',
        holder.get('started_at') or '?', str(holder.get('run_id') or '?')[:8])


def _age_seconds(started_at: t.Any, now: datetime.datetime) -> float | None:
    try:
        started = datetime.datetime.fromisoformat(str(started_at))
    except ValueError:
        return None
    if started.tzinfo is None:
        return None
    return (now - started).total_seconds()
