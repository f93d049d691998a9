"""The throughput history: the server samples the app every few seconds and keeps the
last minutes in a ring buffer, so the page can draw them without any store of its own.

Every rate is the growth of a count that only grows (kept by the store as the events or
outcomes it counts are written) between two samples, over the time between the two
reads: never a count published now and then (an executor's heartbeat), which would read
0 in one interval and twice the rate in the next whenever it is published less often
than the samples are taken.
"""

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


def rate(before: int | None, after: int | None, seconds: float) -> float | None:
    """How fast a count that only grows grew between two reads ``seconds`` apart: None
    when either read is unknown, no time passed, or the count went down (it was reset,
    e.g. its key deleted, so the interval's growth cannot be told)."""
    if before is None or after is None or seconds <= 0 or after < before:
        return None
    return (after - before) / seconds


@dataclass(frozen=True)
class StreamCounts:
    """What one look read of a processor's stream."""

    appended: int | None
    """Events ever appended to the stream (trimming does not lower it); None: unknown."""
    waiting: int | None
    """Its backlog: not yet delivered plus delivered and not acknowledged; None: unknown."""
    lost: int
    """Events trimmed before the processor read them, ever."""


def processed_rate(before: StreamCounts, after: StreamCounts, seconds: float) -> float | None:
    """Events acknowledged per second between two looks: those that arrived less the
    growth of the backlog and of the events lost to trimming (None when a count is
    unknown or the stream was reset). The reads of one look are a few milliseconds
    apart, so an event arriving between them can show in one interval rather than the
    next: never below 0."""
    arrived = rate(before.appended, after.appended, seconds)
    if arrived is None or before.waiting is None or after.waiting is None or seconds <= 0:
        return None
    grown = (after.waiting - before.waiting) + (after.lost - before.lost)
    return max(0.0, arrived - grown / seconds)


def finished_total(snap: dict[str, Any]) -> int | None:
    """Job tries finished since the queue began (succeeded, retried or dead), as the
    store counts them with the outcomes; None for an app without jobs."""
    totals = (snap.get("jobs") or {}).get("totals")
    if totals is None:
        return None
    return int(totals["succeeded"]) + int(totals["retried"]) + int(totals["dead"])


def stream_counts(proc: dict[str, Any]) -> StreamCounts:
    """The counts of one processor of a snapshot."""
    parts = proc["partitions"]
    unknown = any(p["lag"] is None for p in parts)
    waiting = None if unknown else sum(p["lag"] + p["pending"] for p in parts)
    return StreamCounts(proc.get("appended"), waiting, sum(p.get("lost") or 0 for p in parts))


@dataclass(frozen=True)
class Sample:
    at: float
    jobs_per_second: float | None
    """Job tries finished (succeeded, retried or dead) per second since the sample before."""
    backlog: dict[str, int]
    """Per processor: events not yet delivered plus delivered and not acknowledged."""
    processed: dict[str, float | None]
    """Per processor: events acknowledged per second since the sample before
    (:func:`processed_rate`)."""
    interval: float | None = None
    """The seconds between the reads of the counts these rates are over (None at the
    first sample): a rate times it is the count of its interval."""
    read_at: float | None = None
    """When this sample's counts were read (the interval ends there)."""


@dataclass
class Sampler:
    """Turns snapshots into samples; ``keep`` of them, oldest dropped first."""

    keep: int = 120
    samples: deque[Sample] = field(init=False)
    _finished: int | None = None
    _streams: dict[str, StreamCounts] = field(default_factory=dict)
    _read_at: float | None = None

    def __post_init__(self) -> None:
        self.samples = deque(maxlen=self.keep)

    def add(self, snap: dict[str, Any], at: float) -> Sample:
        """The sample of a snapshot taken at ``at``; its rates are over the time between
        this snapshot's reads of the counts and the previous one's (``read_at``)."""
        read_at = float(snap.get("read_at", at))
        spent = read_at - self._read_at if self._read_at is not None else 0.0
        finished = finished_total(snap)
        jobs_rate = rate(self._finished, finished, spent)
        backlog = {
            proc["name"]: sum((p["lag"] or 0) + p["pending"] for p in proc["partitions"])
            for proc in snap["processors"]
        }
        streams = {proc["name"]: stream_counts(proc) for proc in snap["processors"]}
        processed: dict[str, float | None] = {}
        for name, now in streams.items():
            before = self._streams.get(name)
            processed[name] = None if before is None else processed_rate(before, now, spent)
        self._finished, self._streams, self._read_at = finished, streams, read_at
        sample = Sample(at, jobs_rate, backlog, processed, spent if spent > 0 else None, read_at)
        self.samples.append(sample)
        return sample

    def as_json(self) -> list[dict[str, Any]]:
        return [
            {
                "at": s.at,
                "jobs_per_second": s.jobs_per_second,
                "backlog": s.backlog,
                "processed": s.processed,
                "interval": s.interval,
                "read_at": s.read_at,
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
