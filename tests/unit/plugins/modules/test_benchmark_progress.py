# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.vllm.plugins.module_utils import _benchmark_progress
from ansible_collections.llmops.vllm.plugins.modules import benchmark_progress, openai_benchmark
from ansible_collections.llmops.vllm.tests.unit.plugins.module_utils.openai_stream_server import ScriptedServer, Stream


class ModuleExit(Exception):
    pass


class ModuleFailure(Exception):
    pass


@pytest.fixture(autouse=True)
def module_exits(monkeypatch):
    def exit_json(self, **result):
        raise ModuleExit(result)

    def fail_json(self, **result):
        raise ModuleFailure(result)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


@pytest.fixture
def instant_waits(monkeypatch):
    """The poller's waits take no time: its sleep moves the clock it reads."""
    now = [100.0]

    def sleep(seconds):
        now[0] += seconds

    monkeypatch.setattr(_benchmark_progress.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(_benchmark_progress.time, "sleep", sleep)
    return now


def run_module(module, args, outcome=ModuleExit):
    with patch_module_args(args):
        with pytest.raises(outcome) as caught:
            module.main()
    return caught.value.args[0]


def streams(count, tokens=3):
    return [Stream(chunks=[(0.0, 1), (0.0, tokens - 1)], prompt_tokens=9) for dummy in range(count)]


@pytest.fixture
def snapshots(monkeypatch):
    """Every progress document as the benchmark wrote it, each write kept (none throttled)."""
    written = []
    original = _benchmark_progress.write_atomically

    def keep(path, document):
        original(path, document)
        with open(path) as stream:
            written.append(json.load(stream))

    monkeypatch.setattr(_benchmark_progress, "write_atomically", keep)
    monkeypatch.setattr(_benchmark_progress, "WRITE_INTERVAL", 0.0)
    return written


def test_the_benchmark_writes_its_progress_while_it_runs(tmp_path, snapshots):
    path = str(tmp_path / "async" / "bench.json")
    with ScriptedServer(streams(1 + 2 * 2 * 2)) as server:
        result = run_module(openai_benchmark, {
            "base_url": server.base_url, "model": "tiny", "num_prompts": 2, "concurrency": [1, 2], "repeats": 2,
            "max_tokens": 3, "progress_file": path,
        })

    assert [level["completed"] for level in result["results"]] == [4, 4]
    assert "progress_file" not in result["options"]
    assert {snapshot["planned"] for snapshot in snapshots} == {9}
    done = [snapshot["done"] for snapshot in snapshots]
    assert done == sorted(done) and done[0] == 0 and set(range(10)) <= set(done)
    assert [snapshot["concurrency"] for snapshot in snapshots if snapshot["level_done"] == 0] == [None, 2, 1, 2]
    assert not any(snapshot["finished"] for snapshot in snapshots[:-1])
    final = _benchmark_progress.read_progress(path)
    assert (final["done"], final["failed"], final["output_tokens"], final["finished"]) == (9, 0, 27, True)


def test_failed_requests_are_counted_and_a_failed_benchmark_still_finishes_its_file(tmp_path, snapshots):
    path = str(tmp_path / "bench.json")
    refused = [Stream(status=500, error_body={"error": {"message": "engine dead"}}) for dummy in range(3)]
    with ScriptedServer(streams(1) + refused) as server:
        result = run_module(openai_benchmark, {
            "base_url": server.base_url, "model": "tiny", "num_prompts": 3, "max_tokens": 3, "progress_file": path,
        }, ModuleFailure)

    assert result["msg"].startswith("No request succeeded.")
    final = _benchmark_progress.read_progress(path)
    assert (final["done"], final["failed"], final["finished"]) == (4, 3, True)


def test_without_a_progress_file_nothing_is_written(tmp_path, snapshots):
    with ScriptedServer(streams(2)) as server:
        run_module(openai_benchmark, {"base_url": server.base_url, "model": "tiny", "num_prompts": 1, "max_tokens": 3})
    assert snapshots == []


def job(tmp_path, status, progress=None):
    (tmp_path / "42.7").write_text(json.dumps(status))
    path = tmp_path / "bench.json"
    if progress is not None:
        path.write_text(json.dumps(progress))
    return {"jid": "42.7", "progress_file": str(path), "async_dir": str(tmp_path), "interval": 2}


def progress(**overrides):
    document = {"version": 1, "pid": os.getpid(), "started": 1.0, "updated": 2.0, "elapsed": 1.0, "planned": 9,
                "done": 3, "failed": 0, "output_tokens": 9, "concurrency": 2, "level_planned": 4, "level_done": 2,
                "level_elapsed": 1.0, "finished": False}
    document.update(overrides)
    return document


def test_a_running_job_is_unfinished_with_its_progress_line(tmp_path, instant_waits):
    result = run_module(benchmark_progress, job(tmp_path, {"started": 1, "finished": 0}, progress()))
    assert result["finished"] is False and result["changed"] is False
    assert result["msg"].startswith("3/9 requests at concurrency 2, ")
    assert result["progress"]["done"] == 3 and result["remaining_s"] is not None
    assert "gone" not in result and result["elapsed"] == 2.0


def test_a_finished_job_is_finished_at_once_with_the_benchmark_s_result_without_its_arguments(tmp_path):
    finished = {"changed": False, "results": [], "msg": "Measured", "invocation": {"module_args": {"api_key": "x"}}}
    result = run_module(benchmark_progress, job(tmp_path, finished, progress(done=9, finished=True)))
    assert result["finished"] is True and result["remaining_s"] is None
    assert result["msg"].startswith("9/9 requests, ") and "finished after" in result["msg"]
    assert result["job"] == {"changed": False, "results": [], "msg": "Measured"}


def test_a_running_job_gives_no_result_yet(tmp_path, instant_waits):
    result = run_module(benchmark_progress, job(tmp_path, {"started": 1, "finished": 0}, progress()))
    assert "job" not in result


def test_a_job_killed_at_its_limit_is_finished_with_its_failure(tmp_path):
    result = run_module(benchmark_progress, job(tmp_path, {"failed": True, "msg": "Timeout exceeded"}))
    assert (result["finished"], result["msg"]) == (True, "benchmark finished")
    assert result["job"] == {"failed": True, "msg": "Timeout exceeded"}


def test_an_unknown_job_fails(tmp_path):
    args = dict(job(tmp_path, {}), jid="1.1")
    result = run_module(benchmark_progress, args, ModuleFailure)
    assert result["msg"].startswith("Cannot read the async job 1.1 in %s: " % tmp_path)
    assert result["finished"] is False


def test_a_job_whose_benchmark_died_fails(tmp_path, monkeypatch, instant_waits):
    monkeypatch.setattr(_benchmark_progress, "_process_alive", lambda pid: False)
    args = dict(job(tmp_path, {"started": 1, "finished": 0}, progress(pid=999999)), interval=30)
    result = run_module(benchmark_progress, args, ModuleFailure)
    assert result["msg"].startswith("the benchmark process 999999 is gone and left no result; last seen: 3/9")


def test_a_progress_file_that_cannot_be_written_later_costs_only_a_warning(tmp_path, monkeypatch):
    calls = []
    warnings = []

    def full_disk(path, document):
        calls.append(document["done"])
        if len(calls) > 1:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(_benchmark_progress, "write_atomically", full_disk)
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning: warnings.append(warning))
    with ScriptedServer(streams(3)) as server:
        result = run_module(openai_benchmark, {
            "base_url": server.base_url, "model": "tiny", "num_prompts": 2, "max_tokens": 3,
            "progress_file": str(tmp_path / "bench.json"),
        })

    assert result["results"][0]["completed"] == 2
    assert len(calls) == 2
    assert warnings[-1] == ("Progress was not written to %s after OSError: [Errno 28] No space left on device."
                            % (tmp_path / "bench.json"))


def test_a_progress_file_that_cannot_be_created_fails_before_any_request(tmp_path):
    (tmp_path / "file").write_text("")
    with ScriptedServer(streams(3)) as server:
        result = run_module(openai_benchmark, {
            "base_url": server.base_url, "model": "tiny", "num_prompts": 2, "max_tokens": 3,
            "progress_file": str(tmp_path / "file" / "bench.json"),
        }, ModuleFailure)
        assert server.requests == []
    assert result["msg"].startswith("Cannot run the benchmark: ")
