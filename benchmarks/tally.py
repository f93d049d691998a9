"""What a benchmark process measures about itself, on clocks comparable across processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

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

    def add(self, n: int) -> None:
        self.last = now()
        if not self.count:
            self.first, self.untimed = self.last, n
        self.count += n

    def rate(self) -> float:
        return (self.count - self.untimed) / (self.last - self.first)

    def result(self) -> dict[str, float]:
        return {
            "events": self.count,
            "untimed": self.untimed,
            "first": self.first,
            "last": self.last,
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
