# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Monotonic deadlines and capped backoff, shared by every wait of the collection."""

from __future__ import annotations

import time

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


class StaleToken(ValueError):
    """A deadline token that cannot be trusted on this host any more."""


def read_boot_id():
    """Identify the current boot, or return None where the kernel does not say."""
    try:
        with open(BOOT_ID_PATH, encoding="ascii") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


class Deadline:
    """A wait's time budget, measured on the monotonic clock.

    The wall clock can jump (NTP, an operator), the monotonic clock cannot; it is also shared by
    every process of one boot, which is what lets a wait continue across module runs (to_token).
    """

    def __init__(self, timeout, started=None):
        self.timeout = float(timeout)
        self.started = time.monotonic() if started is None else float(started)

    def elapsed(self):
        return time.monotonic() - self.started

    def remaining(self):
        return max(0.0, self.started + self.timeout - time.monotonic())

    def expired(self):
        return self.remaining() <= 0.0

    def sleep(self, seconds):
        """Pause, but never past the deadline, so the last check happens on time."""
        pause = min(seconds, self.remaining())
        if pause > 0:
            time.sleep(pause)

    def to_token(self):
        return {"boot_id": read_boot_id(), "started": self.started}

    @classmethod
    def from_token(cls, token, timeout):
        """Continue the wait a previous module run began on this host."""
        try:
            started = float(token["started"])
        except (KeyError, TypeError, ValueError):
            raise StaleToken("the token has no valid 'started' time") from None
        if token.get("boot_id") != read_boot_id():
            raise StaleToken("the token was made before the host last booted")
        if started > time.monotonic():
            raise StaleToken("the token's start lies in the future of this host's clock")
        return cls(timeout, started=started)


class Backoff:
    """Poll intervals that start short and double up to a cap.

    Short first intervals catch a service that is almost ready; the cap bounds both how late a
    change is noticed and how often a slow start is polled.
    """

    def __init__(self, cap, first=0.05, factor=2.0):
        self.cap = float(cap)
        self.factor = factor
        self._next = min(first, self.cap)

    def next(self):
        delay = self._next
        self._next = min(self._next * self.factor, self.cap)
        return delay
