"""The lease: how long an executor may count on holding the locks it last extended."""

from __future__ import annotations

import asyncio
import time

LEASE_MARGIN = 0.2
"""Fraction of the lock's lifetime we do not count on (clock drift, slow round trips)."""


class Lease:
    """Valid until shortly before the locks extended by the last successful heartbeat
    expire. A consumer starts an iteration only while it is valid, so an executor that was
    paused or cut off from the store never processes a partition someone else took."""

    def __init__(self, lock_expiry: float) -> None:
        self.lock_expiry = lock_expiry
        self.until = 0.0
        self._beaten = asyncio.Event()

    def valid(self) -> bool:
        return time.monotonic() < self.until

    def extended(self, started: float) -> None:
        """A heartbeat sent at ``started`` (monotonic) extended every lock we hold."""
        self.until = started + self.lock_expiry * (1 - LEASE_MARGIN)
        self._beaten.set()

    async def renewed(self, within: float = 1.0) -> bool:
        """Wait (``within`` seconds at most) for the next successful heartbeat; True if it
        came and the lease is valid."""
        self._beaten.clear()
        try:
            async with asyncio.timeout(within):
                await self._beaten.wait()
        except TimeoutError:
            return False
        return self.valid()
