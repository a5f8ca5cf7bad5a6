# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import datetime

from ansible_collections.llmops.vllm.plugins.plugin_utils._switch_lock import describe, lock_verdict

NOW = datetime.datetime(2026, 12, 1, 3, 0, tzinfo=datetime.timezone.utc)
ME = {'run_id': 'b' * 32, 'controller': 'ctl-1', 'user': 'ops', 'pid': 200, 'pid_started': '900'}


def holder(**changes):
    values = {'run_id': 'a' * 32, 'controller': 'ctl-1', 'user': 'alice', 'playbook': 'deploy-ngram.yml',
              'started_at': '2026-12-01T02:50:00+00:00', 'pid': 100, 'pid_started': '500'}
    values.update(changes)
    return values


def alive(*pids):
    return lambda pid, started: pid in pids


def verdict(lock, process_alive=alive(), stale_after=3600, written_at=None):
    return lock_verdict(lock, ME, NOW, process_alive, stale_after, written_at=written_at)


def test_no_lock_is_free_and_our_own_lock_is_ours():
    assert verdict(None)['verdict'] == 'free'
    assert verdict(holder(run_id=ME['run_id']))['verdict'] == 'mine'


def test_a_live_run_on_this_controller_holds_the_lock_and_is_named():
    answer = verdict(holder(), process_alive=alive(100))

    assert answer == {'verdict': 'held', 'reason': 'held by alice@ctl-1 (playbook deploy-ngram.yml, since '
                                                   '2026-12-01T02:50:00+00:00, run aaaaaaaa), still running as PID 100'}


def test_a_killed_run_on_this_controller_left_a_stale_lock_at_once():
    answer = verdict(holder(), process_alive=alive())

    assert answer['verdict'] == 'stale'
    assert answer['reason'].endswith('whose ansible-playbook (PID 100) no longer runs on this controller')


def test_the_pid_check_passes_the_recorded_start_time_so_a_reused_pid_is_not_the_holder():
    seen = []

    verdict(holder(), process_alive=lambda pid, started: seen.append((pid, started)) or False)

    assert seen == [(100, '500')]


def test_another_controllers_lock_is_held_until_it_is_older_than_any_switch():
    other = holder(controller='ctl-2')

    assert verdict(other, stale_after=3600)['verdict'] == 'held'
    old = verdict(other, stale_after=300)
    assert old['verdict'] == 'stale'
    assert 'for 600 s, longer than any switch takes (stale after 300 s)' in old['reason']


def test_a_lock_without_a_holder_is_stale_never_waited_on():
    assert verdict({})['verdict'] == 'stale'
    assert 'names no holder' in verdict({'user': 'x'})['reason']


def test_a_lock_with_an_unreadable_time_from_elsewhere_ages_from_when_its_file_was_written():
    lock = holder(controller='ctl-2', started_at='yesterday')

    # Written a minute ago: held, whatever its started_at says.
    assert verdict(lock, stale_after=3600, written_at='2026-12-01T02:59:00+00:00')['verdict'] == 'held'
    # Written two hours ago: as stale as a readable lock of that age, so that it never blocks forever.
    old = verdict(lock, stale_after=3600, written_at='2026-12-01T01:00:00+00:00')
    assert old['verdict'] == 'stale'
    assert 'for 7200 s, longer than any switch takes (stale after 3600 s)' in old['reason']
    # Without any time at all it is not guessed stale.
    assert verdict(lock, stale_after=1)['verdict'] == 'held'


def test_describe_copes_with_missing_fields():
    assert describe({'run_id': 'abc'}) == '?@? (playbook ?, since ?, run abc)'
