"""The throughput history: the server samples the app every few seconds and keeps the
last minutes in a ring buffer, so the page can draw them without any store of its own."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from runnel.runtime.retry import reraise_if_cancelled

log = logging.getLogger("runnel.dashboard")


@dataclass(frozen=True)
class Sample:
    at: float
    jobs_per_second: float | None
    """Jobs finished (succeeded or failed a try) per second since the sample before."""
    backlog: dict[str, int]
    """Per processor: events not yet delivered plus delivered and not acknowledged."""
    processed: dict[str, float | None]
    """Per processor: events acknowledged per second since the sample before: those that
    arrived less the growth of the backlog (trimming the stream makes it an undercount)."""


@dataclass
class Sampler:
    """Turns snapshots into samples; ``keep`` of them, oldest dropped first."""

    keep: int = 120
    samples: deque[Sample] = field(init=False)
    _finished: dict[str, int] = field(default_factory=dict)
    _streams: dict[str, tuple[int | None, int]] = field(default_factory=dict)
    _last_at: float | None = None

    def __post_init__(self) -> None:
        self.samples = deque(maxlen=self.keep)

    def add(self, snap: dict[str, Any], at: float) -> Sample:
        finished = {
            str(ex["id"]): int(ex.get("done", 0) or 0) + int(ex.get("failed", 0) or 0)
            for ex in (snap["jobs"] or {}).get("executors", [])
        }
        rate = None
        if self._last_at is not None and at > self._last_at:
            # Counters restart with each executor: one that is new counts from zero.
            grown = sum(max(0, n - self._finished.get(ex, 0)) for ex, n in finished.items())
            rate = grown / (at - self._last_at)
        backlog = {
            proc["name"]: sum((p["lag"] or 0) + p["pending"] for p in proc["partitions"])
            for proc in snap["processors"]
        }
        streams = {
            proc["name"]: (proc.get("length"), backlog[proc["name"]]) for proc in snap["processors"]
        }
        processed: dict[str, float | None] = {}
        for name, (length, waiting) in streams.items():
            before_length, before_waiting = self._streams.get(name, (None, 0))
            if (
                length is None
                or before_length is None
                or self._last_at is None
                or at <= self._last_at
            ):
                processed[name] = None
                continue
            done = (length - before_length) - (waiting - before_waiting)
            processed[name] = max(0, done) / (at - self._last_at)
        self._finished, self._streams, self._last_at = finished, streams, at
        sample = Sample(at=at, jobs_per_second=rate, backlog=backlog, processed=processed)
        self.samples.append(sample)
        return sample

    def as_json(self) -> list[dict[str, Any]]:
        return [
            {
                "at": s.at,
                "jobs_per_second": s.jobs_per_second,
                "backlog": s.backlog,
                "processed": s.processed,
            }
            for s in self.samples
        ]

    async def run(self, take: Callable[[], Awaitable[dict[str, Any]]], every: float) -> None:
        """Sample until cancelled; a failed look (Redis away) leaves a gap, not an end."""
        while True:
            reraise_if_cancelled()
            try:
                self.add(await take(), time.time())
            except Exception as exc:
                reraise_if_cancelled()
                log.debug("sampling failed: %s", exc)
            await asyncio.sleep(every)
