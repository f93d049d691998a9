"""The time a job queue goes by: when jobs are due, retries' backoff, timestamps.

Every component takes the app's clock (``app.clock``) instead of calling ``time.time``,
so a test can move time forward and watch a retry come due without sleeping.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    """The machine's wall clock (keep hosts' clocks in sync, e.g. with NTP)."""

    def now(self) -> float:
        return time.time()

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when told to: ``clock.advance(60)``. For tests."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, when: float) -> None:
        with self._lock:
            self._now = when

    def __repr__(self) -> str:
        return f"ManualClock({self.now()!r})"
