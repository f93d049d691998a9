"""Plain counters the hot paths update; the flusher turns them into Prometheus metrics.

Nothing here imports prometheus_client: counting an event is an integer addition done
once per acknowledgement batch or fetch (not per event), so the counters stay on whether
or not metrics are served. Only the processing-time sample is taken when metrics are on.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runnel.processor import Processor

EVENT_BUCKETS: tuple[float, ...] = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01)
EVENT_BUCKETS += (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Upper bounds (seconds) of the processing-time histogram: an iteration is often far
below a millisecond."""
JOB_BUCKETS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
JOB_BUCKETS += (2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

SAMPLE_INTERVAL = 5.0
"""Seconds between a worker's samples of lag, pending and the queue's counts (Redis round
trips; runtime.py): the gauges are that old at most."""
SAMPLE_EVERY = 16
"""With metrics on, one processor iteration in this many is timed (every one under
``take()``): two clock readings and a bucket per event would cost a few percent of the
per-event throughput, a sample costs nothing measurable and shows the same distribution."""

enqueued: Counter[tuple[str, str, str]] = Counter()
"""Jobs enqueued by this process, by (app, job name, queue): counted where ``delay()`` runs."""
ticks: Counter[tuple[str, str, str, str]] = Counter()
"""Ticks of periodic jobs this process settled, by (app, job name, queue, how): ``on_time``
and ``caught_up`` (one run for missed ticks) enqueued a job, ``skipped`` missed ticks did
not."""


class Timings:
    """Histogram bucket counts kept locally (``le`` semantics, the last one is +Inf)."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.total += seconds


class PartitionStats:
    """One partition of one processor, in this process."""

    __slots__ = ("acked", "failed", "processed", "redelivered", "sample_every", "timings")

    def __init__(self, timings: Timings, sample_every: int) -> None:
        self.processed = 0
        self.failed = 0
        self.redelivered = 0
        self.acked = 0
        self.timings = timings  # shared by the processor's partitions
        self.sample_every = sample_every  # 0: metrics off, time nothing


class TableStats:
    """One table as used by one processor in this process (cumulative)."""

    __slots__ = ("closed", "commits", "hits", "late", "misses")

    def __init__(self) -> None:
        self.commits = 0
        self.hits = 0
        self.misses = 0
        self.late = 0
        """Events too late for every window they would be in (windowed tables)."""
        self.closed = 0
        """Windows closed (and emitted, if the table says where)."""


class ProcessorStats:
    """One processor's counters, by partition number (kept across reassignments, so
    they only ever grow)."""

    def __init__(self, processor: Processor, enabled: bool) -> None:
        self.name = processor.name
        self.stream = processor.stream.name
        self.rebalances = 0
        self.timings = Timings(EVENT_BUCKETS)
        self.sample_every = SAMPLE_EVERY if enabled else 0
        self.partitions: dict[int, PartitionStats] = {}
        self.tables: dict[str, TableStats] = {}
        self._numbers = {p.key: p.number for p in processor.stream.partitions}

    def table(self, name: str) -> TableStats:
        stats = self.tables.get(name)
        if stats is None:
            stats = self.tables[name] = TableStats()
        return stats

    def partition(self, number: int) -> PartitionStats:
        stats = self.partitions.get(number)
        if stats is None:
            stats = self.partitions[number] = PartitionStats(self.timings, self.sample_every)
        return stats

    def by_key(self, key: str) -> PartitionStats:
        return self.partition(self._numbers[key])


class JobStats:
    """One job function's outcomes in this process."""

    __slots__ = ("cancelled", "dead", "limited", "retried", "started", "succeeded", "timings")

    def __init__(self) -> None:
        self.started = 0
        self.succeeded = 0
        self.retried = 0
        self.dead = 0
        self.cancelled = 0
        """Jobs taken here and stopped (or never started) because they were cancelled."""
        self.limited: dict[str, int] = {}
        """Starts put off by a limit (``rate``, ``concurrency``): jobs/admission.py."""
        self.timings = Timings(JOB_BUCKETS)

    def finished(self, kind: str, seconds: float | None = None) -> None:
        """Count an outcome (``success``, ``retry``, ``dead``; a release is not one)."""
        if kind == "success":
            self.succeeded += 1
        elif kind == "retry":
            self.retried += 1
        elif kind == "dead":
            self.dead += 1
        else:
            return
        if seconds is not None:
            self.timings.observe(seconds)


class JobsStats:
    """The job executor's counters, by job name."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobStats] = {}

    def job(self, name: str) -> JobStats:
        stats = self.jobs.get(name)
        if stats is None:
            stats = self.jobs[name] = JobStats()
        return stats


class WorkerStats:
    """Everything one worker counts; ``enabled`` when metrics are collected."""

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled
        self.processors: dict[str, ProcessorStats] = {}
        self.jobs = JobsStats()

    def processor(self, processor: Processor) -> ProcessorStats:
        stats = self.processors.get(processor.id)
        if stats is None:
            stats = self.processors[processor.id] = ProcessorStats(processor, self.enabled)
        return stats
