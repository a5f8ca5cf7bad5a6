# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils import _benchmark_progress as progress_utils
from ansible_collections.llmops.vllm.plugins.module_utils._benchmark_progress import (
    ProgressWriter,
    job_status,
    job_time_limit,
    planned_requests,
    progress_line,
    read_progress,
    remaining_seconds,
    wait_for_job,
)
from ansible_collections.llmops.vllm.plugins.module_utils._load_generation import RequestOutcome


def progress(**overrides):
    document = {
        "version": 1, "pid": os.getpid(), "started": 1000.0, "updated": 1100.0, "elapsed": 100.0,
        "planned": 576, "done": 120, "failed": 0, "output_tokens": 81200, "concurrency": 1,
        "level_planned": 288, "level_done": 119, "level_elapsed": 99.0, "finished": False,
    }
    document.update(overrides)
    return document


class FakeClock:
    def __init__(self, now=0.0):
        self.now = now

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def outcome(success=True, tokens=10):
    result = RequestOutcome()
    result.success = success
    result.output_tokens = tokens if success else 0
    return result


def test_the_plan_counts_the_warmup_and_every_repeat_of_every_level():
    assert planned_requests({"warmup_requests": 1, "concurrency": [1, 8], "repeats": 6, "num_prompts": 48}) == 577


def test_the_current_level_goes_at_its_own_pace_and_later_levels_at_the_whole_pace():
    # 456 left: 169 at concurrency 1 at its pace (1.2 requests/s), 287 later at the whole pace (also 1.2 requests/s).
    doc = progress(done=120, elapsed=100.0, level_done=120, level_elapsed=100.0, level_planned=289)
    assert remaining_seconds(doc, now=1100.0) == pytest.approx((169 + 287) / 1.2)


def test_a_faster_current_level_is_not_held_back_by_a_slow_warmup():
    # The warm-up took 60 s for 1 request; the level has done 10 in 10 s.
    doc = progress(planned=21, done=11, elapsed=70.0, level_planned=20, level_done=10, level_elapsed=10.0)
    assert remaining_seconds(doc, now=1100.0) == pytest.approx(10.0)


def test_a_level_just_begun_uses_the_whole_pace():
    doc = progress(planned=200, done=100, elapsed=100.0, level_planned=100, level_done=0, level_elapsed=3.0)
    assert remaining_seconds(doc, now=1100.0) == pytest.approx(100.0)


def test_the_time_since_the_last_update_is_taken_off_down_to_zero():
    doc = progress(planned=200, done=100, elapsed=100.0, level_planned=100, level_done=0, updated=1100.0)
    assert remaining_seconds(doc, now=1130.0) == pytest.approx(70.0)
    assert remaining_seconds(doc, now=1300.0) == 0.0


def test_no_estimate_before_the_first_request_finished():
    assert remaining_seconds(progress(done=0, level_done=0), now=1100.0) is None


def test_the_progress_line_names_requests_rate_and_time_left():
    doc = progress(done=120, elapsed=100.0, level_done=120, level_elapsed=100.0, level_planned=289)
    assert progress_line(doc, now=1100.0) == (
        "120/576 requests at concurrency 1, 812 output tok/s so far, about 6.3 min left")


def test_the_progress_line_counts_failures_and_long_waits_in_hours():
    doc = progress(done=10, failed=3, elapsed=100.0, level_done=10, level_elapsed=100.0, level_planned=288,
                   output_tokens=700)
    assert progress_line(doc, now=1100.0) == (
        "10/576 requests (3 failed) at concurrency 1, 7 output tok/s so far, about 1.6 h left")


def test_the_rate_counts_the_time_since_the_start_not_the_last_update():
    doc = progress(output_tokens=1000, elapsed=10.0, updated=1010.0)
    assert ", 10 output tok/s so far" in progress_line(doc, now=1100.0)


def test_the_progress_line_before_any_request_and_once_finished():
    assert progress_line(None, now=1.0) == "benchmark starting"
    assert progress_line(progress(done=0, level_done=0, output_tokens=0), now=1045.0) == (
        "0/576 requests at concurrency 1, 0 output tok/s so far, 45 s elapsed, time left not known before the first "
        "request finishes")
    done = progress(done=576, elapsed=3000.0, output_tokens=240000, finished=True)
    assert progress_line(done, now=5000.0, finished=True) == (
        "576/576 requests, 80 output tok/s, finished after 50.0 min")


def test_the_job_limit_follows_the_timeout_and_the_number_of_requests():
    options = {"concurrency": [1, 8], "num_prompts": 50, "warmup_requests": 1, "repeats": 1, "timeout": 600,
               "request_rate": None}
    assert job_time_limit(options) == 2 * (600 + 50 * 600 + 7 * 600 + 2 * 2 * (2 * 600 + 10)) + 120
    longer = dict(options, repeats=2)
    assert job_time_limit(longer) - job_time_limit(options) == 2 * (50 + 7) * 600
    paced = dict(options, request_rate=0.5)
    assert job_time_limit(paced) - job_time_limit(options) == 2 * 2 * 100


def test_the_writer_counts_requests_and_replaces_the_file_whole(tmp_path):
    path = str(tmp_path / "async" / "bench.json")
    clock = FakeClock(50.0)
    writer = ProgressWriter(path, planned=5, clock=clock, wall_clock=lambda: 1000.0 + clock.now)
    assert read_progress(path)["done"] == 0
    writer.level(4, 4)
    clock.now += 2.0
    writer.request_done(outcome(tokens=10))
    clock.now += 0.5
    writer.request_done(outcome(success=False))
    # Within a second of the last write the file is left as it was.
    assert read_progress(path)["done"] == 1
    clock.now += 1.0
    writer.request_done(outcome(tokens=30))
    doc = read_progress(path)
    assert (doc["done"], doc["failed"], doc["output_tokens"], doc["level_done"]) == (3, 1, 40, 3)
    assert doc["elapsed"] == pytest.approx(3.5) and doc["started"] == pytest.approx(1050.0)
    writer.finish()
    assert read_progress(path)["finished"] is True
    assert os.listdir(os.path.dirname(path)) == ["bench.json"]


@pytest.mark.parametrize("text", ["", "{\"done\": 1", "[]", json.dumps({"version": 99})])
def test_a_missing_or_foreign_progress_file_reads_as_none(tmp_path, text):
    path = tmp_path / "bench.json"
    path.write_text(text)
    assert read_progress(str(path)) is None
    assert read_progress(str(tmp_path / "absent.json")) is None


@pytest.mark.parametrize("text, finished", [
    ("", False),
    (json.dumps({"started": 1, "finished": 0, "ansible_job_id": "1.2"}), False),
    (json.dumps({"started": True, "finished": False}), False),
    (json.dumps({"changed": False, "results": [], "msg": "Measured 1 concurrency level"}), True),
    (json.dumps({"failed": True, "msg": "Timeout exceeded", "child_pid": 4}), True),
])
def test_the_job_file_reads_as_async_status_reads_it(tmp_path, text, finished):
    (tmp_path / "1.2").write_text(text)
    assert job_status(str(tmp_path), "1.2")[0] is finished


def test_a_missing_job_file_is_an_error(tmp_path):
    with pytest.raises(OSError):
        job_status(str(tmp_path), "1.2")


def running_job(tmp_path, doc):
    (tmp_path / "1.2").write_text(json.dumps({"started": 1, "finished": 0}))
    (tmp_path / "bench.json").write_text(json.dumps(doc))
    return str(tmp_path), str(tmp_path / "bench.json")


def test_an_unfinished_job_is_answered_after_the_interval(tmp_path):
    async_dir, path = running_job(tmp_path, progress(updated=1100.0))
    clock = FakeClock()
    answer = wait_for_job(async_dir, "1.2", path, 30, clock=clock, wall_clock=lambda: 1100.0, sleep=clock.sleep)
    assert answer["finished"] is False and answer["gone"] is False
    assert answer["elapsed"] == 30.0
    assert answer["msg"].startswith("120/576 requests at concurrency 1")
    assert answer["remaining_s"] == pytest.approx(progress_utils.remaining_seconds(progress(), 1100.0))


def test_a_job_that_finishes_is_answered_at_once(tmp_path):
    async_dir, path = running_job(tmp_path, progress(done=576, finished=True, elapsed=700.0))
    clock = FakeClock()

    def finish_later(seconds):
        clock.sleep(seconds)
        if clock.now >= 3:
            (tmp_path / "1.2").write_text(json.dumps({"changed": False, "results": []}))

    answer = wait_for_job(async_dir, "1.2", path, 30, clock=clock, wall_clock=lambda: 1800.0, sleep=finish_later)
    assert answer["finished"] is True and answer["elapsed"] == 3.0 and answer["remaining_s"] is None
    assert answer["msg"] == "576/576 requests, 116 output tok/s, finished after 11.7 min"


def test_a_job_whose_process_is_gone_is_reported_after_a_grace(tmp_path, monkeypatch):
    async_dir, path = running_job(tmp_path, progress(pid=424242))
    monkeypatch.setattr(progress_utils, "_process_alive", lambda pid: False)
    clock = FakeClock()
    answer = wait_for_job(async_dir, "1.2", path, 30, clock=clock, wall_clock=lambda: 1100.0, sleep=clock.sleep)
    assert answer["gone"] is True and answer["finished"] is False
    assert answer["elapsed"] == progress_utils.GONE_GRACE
    assert answer["msg"].startswith("the benchmark process 424242 is gone and left no result; last seen: 120/576")


def test_a_job_without_progress_yet_is_starting(tmp_path):
    (tmp_path / "1.2").write_text("")
    clock = FakeClock()
    answer = wait_for_job(str(tmp_path), "1.2", str(tmp_path / "none.json"), 0, clock=clock, sleep=clock.sleep)
    assert (answer["finished"], answer["msg"], answer["progress"]) == (False, "benchmark starting", None)
