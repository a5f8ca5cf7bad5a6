# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import datetime
import json
import multiprocessing
import os

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.vllm.plugins.plugin_utils._controller_run import controller_identity, playbooks_of, process_alive
from ansible_collections.llmops.vllm.plugins.modules import switch_lock


class ModuleExit(Exception):
    pass


def raise_result(self, **result):
    raise ModuleExit(result)


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", raise_result)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", raise_result)


def call(path, op, check_mode=False, **extra):
    args = dict(path=str(path), op=op, _ansible_check_mode=check_mode, **extra)
    with patch_module_args(args):
        with pytest.raises(ModuleExit) as caught:
            switch_lock.main()
    return caught.value.args[0]


def test_create_takes_a_free_lock_once_with_a_private_file(tmp_path):
    path = tmp_path / "model.lock"

    first = call(path, "create", holder={"run_id": "a"})
    second = call(path, "create", holder={"run_id": "b"})

    assert (first["done"], first["changed"]) == (True, True)
    assert (second["done"], second["changed"], second["holder"]) == (False, False, {"run_id": "a"})
    assert json.loads(path.read_text()) == {"run_id": "a"}
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_replace_and_remove_act_only_while_the_expected_holder_holds_it(tmp_path):
    path = tmp_path / "model.lock"
    call(path, "create", holder={"run_id": "a"})

    wrong = call(path, "replace", holder={"run_id": "c"}, expected_run_id="b")
    right = call(path, "replace", holder={"run_id": "c"}, expected_run_id="a")
    not_mine = call(path, "remove", expected_run_id="a")
    mine = call(path, "remove", expected_run_id="c")

    assert (wrong["done"], wrong["holder"]) == (False, {"run_id": "a"})
    assert (right["done"], right["holder"]) == (True, {"run_id": "c"})
    assert not_mine["done"] is False
    assert mine["done"] is True and not path.exists()
    assert [name for name in os.listdir(tmp_path) if name.startswith(".switch-lock.")] == []


def test_a_file_cut_short_is_read_as_no_holder_and_can_be_replaced(tmp_path):
    path = tmp_path / "model.lock"
    path.write_text('{"run_id": "a", "contr')

    assert call(path, "read")["holder"] == {}
    assert call(path, "replace", holder={"run_id": "b"}, expected_run_id="")["done"] is True


def test_a_read_says_when_the_lock_was_last_written(tmp_path):
    path = tmp_path / "model.lock"
    assert call(path, "read")["written_at"] is None
    path.write_text('{"run_id": "a", "started_at": "yesterday"}')
    os.utime(path, (1_790_000_000, 1_790_000_000))

    assert call(path, "read")["written_at"] == datetime.datetime.fromtimestamp(
        1_790_000_000, datetime.timezone.utc).isoformat(timespec="seconds")


def test_check_mode_reads_and_writes_nothing(tmp_path):
    path = tmp_path / "model.lock"

    answer = call(path, "create", check_mode=True, holder={"run_id": "a"})

    assert answer["holder"] is None and answer["changed"] is False and not path.exists()


def test_two_takers_at_once_get_one_lock(tmp_path):
    path = str(tmp_path / "model.lock")
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(8)

    def taker(run_id):
        barrier.wait()
        try:
            won = switch_lock._write_new(path, {"run_id": run_id})
        except OSError:
            os._exit(2)
        os._exit(0 if won else 1)

    processes = [context.Process(target=taker, args=("run-%d" % index,)) for index in range(8)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(10)

    codes = [process.exitcode for process in processes]
    assert sorted(codes) == [0] + [1] * 7
    with open(path, encoding="utf-8") as handle:
        assert json.load(handle)["run_id"] == "run-%d" % codes.index(0)


def test_this_process_is_alive_and_its_identity_is_stable():
    me = controller_identity(datetime.datetime.now(datetime.timezone.utc))
    again = controller_identity(datetime.datetime.now(datetime.timezone.utc))

    assert me["run_id"] == again["run_id"] and len(me["run_id"]) == 32
    assert me["pid"] == os.getppid()
    assert process_alive(os.getpid(), None)
    assert process_alive(me["pid"], me["pid_started"])
    assert not process_alive(me["pid"], "0")


def test_the_lock_names_the_playbook_by_file_or_by_fqcn():
    assert playbooks_of(['/usr/bin/ansible-playbook', '-i', 'inventories/production',
                         'playbooks/deploy-ngram.yml']) == 'deploy-ngram.yml'
    assert playbooks_of(['ansible-playbook', 'llmops.vllm.switch_variant', '-e', 'vllm_variant=ngram',
                         '-e', '@vars.yaml']) == 'llmops.vllm.switch_variant'
    assert playbooks_of(['ansible-playbook', '-e', 'vllm_variant=ngram', 'example.com']) is None
