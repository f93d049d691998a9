"""Helpers of the store contract suite: naming partitions, filling them, letting time pass.

Timeouts here only bound a hung test; no test asserts on how long anything took.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from runnel.jobs import ManualClock
from runnel.store import PENDING, Coordination, Log, PartitionId

GROUP = "proc"
"""The processor (and so consumer group) most tests read as."""
CONSUMER = "runnel"
"""The one consumer name Runnel reads as."""
STREAM = "orders"
LONG = 600_000
"""A TTL (ms) that no test outlives."""
SHORT = 300
"""A TTL (ms) a test waits out: on a real store it passes for real."""
MEDIUM = 2_000
"""A TTL (ms) that outlives the few calls after it is set, then is waited out."""
HANG_GUARD = 30.0
"""Seconds after which a wait is a hung test."""


def fresh_app() -> str:
    return f"contract.t{uuid.uuid4().hex[:10]}"


def part(app: str, n: int, stream: str = STREAM) -> PartitionId:
    return PartitionId(app, stream, n)


def numbers(entries: list[Any]) -> list[bytes]:
    return [fields[b"n"] for _, fields in entries]


def ids_of(entries: list[Any]) -> list[bytes]:
    return [xid for xid, _ in entries]


def id_key(xid: bytes) -> tuple[int, int]:
    ms, _, seq = xid.partition(b"-")
    return int(ms), int(seq)


async def fill(log: Log, p: PartitionId, count: int) -> list[bytes]:
    """Append ``count`` entries ``{n: 0..count-1}`` to ``p``; their ids."""
    return await log.append([(p, {b"n": str(i).encode()}) for i in range(count)])


async def pending(c: Coordination, owner: str, p: PartitionId) -> list[bytes]:
    """The ids delivered to the consumer and not acknowledged on ``p``, read by the
    holder of its lock (reading them again changes nothing)."""
    got = await c.read(owner, CONSUMER, {p: PENDING}, 100_000)
    assert got.lost == [], f"{owner} does not hold {p}"
    return [xid for q, entries in got.entries if q == p for xid, _ in entries]


class Time:
    """How time passes for the store under test."""

    async def until(self, check: Callable[[], Awaitable[Any]], what: str) -> Any:
        """Let time pass until ``await check()`` is truthy; its value."""
        deadline = time.monotonic() + HANG_GUARD
        while True:
            value = await check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {HANG_GUARD} s: {what}")
            await self.step()

    async def step(self) -> None:
        await asyncio.sleep(0.02)


class RealTime(Time):
    """A store with the wall clock: waits for real."""


class ManualTime(Time):
    """A store driven by a clock the test moves (``memory://``): each step moves it on
    50 ms (and lets the event loop run)."""

    def __init__(self) -> None:
        self.clock = ManualClock(1000.0)

    def now(self) -> float:
        return self.clock.now()

    async def step(self) -> None:
        self.clock.advance(0.05)
        await asyncio.sleep(0.001)
