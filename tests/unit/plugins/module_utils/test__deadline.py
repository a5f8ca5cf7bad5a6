# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils import _deadline
from ansible_collections.llmops.vllm.plugins.module_utils._deadline import Backoff, Deadline, StaleToken


class Clock:
    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(_deadline, "time", fake)
    return fake


@pytest.fixture
def boot(monkeypatch, tmp_path):
    path = tmp_path / "boot_id"
    path.write_text("6b1f0c5e-2d7a-4c39-9f1e-0a8b7c6d5e4f\n", encoding="ascii")
    monkeypatch.setattr(_deadline, "BOOT_ID_PATH", str(path))
    return path


def test_deadline_counts_elapsed_and_remaining(clock):
    deadline = Deadline(10)
    clock.now += 4

    assert deadline.elapsed() == 4
    assert deadline.remaining() == 6
    assert not deadline.expired()

    clock.now += 7
    assert deadline.remaining() == 0.0
    assert deadline.expired()


def test_sleep_never_passes_the_deadline(clock):
    deadline = Deadline(1)
    deadline.sleep(0.75)
    deadline.sleep(0.75)
    deadline.sleep(0.75)

    assert clock.sleeps == [0.75, 0.25]
    assert deadline.expired()


def test_zero_timeout_is_expired_at_once(clock):
    assert Deadline(0).expired()


def test_backoff_doubles_up_to_its_cap():
    backoff = Backoff(cap=1.0, first=0.1)

    assert [backoff.next() for count in range(6)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


def test_backoff_never_starts_above_its_cap():
    assert Backoff(cap=0.02).next() == 0.02


def test_token_round_trip_continues_the_same_deadline(clock, boot):
    first = Deadline(60)
    clock.now += 45

    resumed = Deadline.from_token(first.to_token(), 60)

    assert resumed.elapsed() == 45
    assert resumed.remaining() == 15


@pytest.mark.parametrize("token, reason", [
    ({"boot_id": "6b1f0c5e-2d7a-4c39-9f1e-0a8b7c6d5e4f"}, "no valid 'started' time"),
    ({"boot_id": "6b1f0c5e-2d7a-4c39-9f1e-0a8b7c6d5e4f", "started": "a while ago"}, "no valid 'started' time"),
    ({"boot_id": "0f0f0f0f-0000-4000-8000-000000000000", "started": 50.0}, "before the host last booted"),
    ({"boot_id": "6b1f0c5e-2d7a-4c39-9f1e-0a8b7c6d5e4f", "started": 500.0}, "lies in the future"),
])
def test_tokens_that_do_not_fit_this_host_are_refused(clock, boot, token, reason):
    with pytest.raises(StaleToken, match=reason):
        Deadline.from_token(token, 60)


def test_without_a_boot_id_tokens_still_work(clock, monkeypatch, tmp_path):
    monkeypatch.setattr(_deadline, "BOOT_ID_PATH", str(tmp_path / "absent"))

    token = Deadline(5).to_token()

    assert token["boot_id"] is None
    assert Deadline.from_token(token, 5).elapsed() == 0
