"""What a benchmark process measures about itself, on clocks comparable across processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

# CLOCK_MONOTONIC on Linux: one clock for every process on the machine, so the first and
# last events of several workers can be compared.
now = time.monotonic


class Tally:
    """Counts processed events and remembers when the first and the last were done.

    ``add`` comes after its events are processed, so the first ``add``'s events were
    processed before ``first``: they are ``untimed``, and left out of a rate.
    """

    def __init__(self) -> None:
        self.count = 0
        self.untimed = 0
        self.first = 0.0
        self.last = 0.0
        self.cpu_first = 0.0

    def add(self, n: int) -> None:
        self.last = now()
        if not self.count:
            self.first, self.untimed = self.last, n
            self.cpu_first = time.process_time()
        self.count += n

    def rate(self) -> float:
        return (self.count - self.untimed) / (self.last - self.first)

    def result(self) -> dict[str, float]:
        """What was counted, and the share of a core this process used from the first
        event to now (the end of the run; idle once the last event was done)."""
        busy = time.process_time() - self.cpu_first if self.count else 0.0
        return {
            "events": self.count,
            "untimed": self.untimed,
            "first": self.first,
            "last": self.last,
            "cpu": busy / (now() - self.first) if self.count else 0.0,
            "cpu_seconds": busy,
        }


def percentiles(latencies: list[float]) -> dict[str, float]:
    """p50, p99 and max of latencies in seconds, as milliseconds."""
    if not latencies:
        return {"events": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    ordered = sorted(latencies)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {"events": len(ordered), "p50_ms": at(0.50), "p99_ms": at(0.99), "max_ms": at(1.0)}


async def paced(rate: int, per_tick: int, seconds: float) -> AsyncIterator[int]:
    """Yield tick numbers on a fixed schedule: ``rate / per_tick`` ticks a second, each at
    its planned time (late ticks are not skipped, so the average rate holds)."""
    interval = per_tick / rate
    ticks = int(seconds / interval)
    start = now()
    for tick in range(ticks):
        delay = start + tick * interval - now()
        if delay > 0:
            await asyncio.sleep(delay)
        yield tick


async def timed_batches(send: Callable[[], Awaitable[Any]], total: int, batch: int) -> dict:
    """Call ``send`` (one batch of ``batch`` events) until ``total`` events went, timed.
    One untimed call first: the rate is of sending, not of connecting."""
    await send()
    rounds = total // batch
    start = now()
    for _ in range(rounds):
        await send()
    return {"events": rounds * batch, "seconds": now() - start}
