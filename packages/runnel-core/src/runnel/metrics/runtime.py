"""A worker's metrics at run time: counters flushed into Prometheus every second, lag,
pending and the job queue's counts sampled every few seconds, ``/metrics`` served.

The hot paths only add to plain integers (:mod:`runnel.metrics.stats`); here the
growth since the last flush goes into prometheus_client's objects, which works the same
in a single process and in multiprocess mode (where only values written through
prometheus_client reach the supervisor).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from runnel import resend
from runnel.exceptions import Misconfigured, TransportError
from runnel.jobs.queues import DEFAULT_QUEUE
from runnel.metrics import stats
from runnel.metrics.server import Server, serve
from runnel.metrics.switch import supervised
from runnel.runtime.retry import Stopped, reraise_if_cancelled, until_stopped

if TYPE_CHECKING:
    from prometheus_client import Counter, Gauge, Histogram

    from runnel.jobs.executor import JobExecutor
    from runnel.metrics.stats import WorkerStats
    from runnel.processing.executor import Executor
    from runnel.runtime.probes import Probed
    from runnel.services import Services
    from runnel.store.log import PartitionId

log = logging.getLogger("runnel.metrics")

FLUSH_INTERVAL = 1.0
"""Seconds between flushes of the counters into Prometheus."""


class Measured(Protocol):
    """What the metrics read of the worker they belong to."""

    @property
    def app(self) -> Services: ...

    @property
    def executors(self) -> Sequence[Executor]: ...

    @property
    def job_executor(self) -> JobExecutor | None: ...

    @property
    def stats(self) -> WorkerStats: ...

    def is_leader(self) -> bool: ...


class WorkerMetrics:
    """The metrics of one worker: started with it, flushed a last time when it stops."""

    def __init__(self, worker: Measured) -> None:
        self.worker = worker
        # Here, not at the top: prometheus_client is only imported by a worker with metrics.
        from runnel.metrics.definitions import Definitions

        self.app = worker.app.name
        self.defs = Definitions()
        self.multiprocess = supervised()
        self.server: Server | None = None
        self._last: dict[tuple[Any, tuple[str, ...]], int] = {}
        self._last_hist: dict[tuple[Any, tuple[str, ...]], tuple[list[int], float]] = {}
        self._sampled: dict[str, set[int]] = {}

    def start(self, probed: Probed) -> None:
        """Serve ``/metrics``, and the probes of ``probed`` beside it, unless a supervisor
        does (a port in use raises Misconfigured)."""
        settings = self.worker.app.settings
        if not self.multiprocess and settings.metrics_port is not None:
            port, host = settings.metrics_port, settings.metrics_host
            self.server = serve(self.defs.registry, port, host, probed)
            log.info(
                "serving metrics on http://%s:%d/metrics", settings.metrics_host, self.server.port
            )

    def close(self) -> None:
        self.flush()
        if self.server is not None:
            self.server.close()
            self.server = None

    async def run(self, stopping: asyncio.Event) -> None:
        """Flush every second and sample every few, until the worker stops."""
        next_sample = 0.0
        while not stopping.is_set():
            reraise_if_cancelled()
            self.flush()
            if time.monotonic() >= next_sample:
                next_sample = time.monotonic() + stats.SAMPLE_INTERVAL
                try:
                    # A sample waits on the store: a stop must not wait for its answer.
                    await until_stopped(self.sample(), stopping)
                except Stopped:
                    return
            try:
                async with asyncio.timeout(FLUSH_INTERVAL):
                    await stopping.wait()
            except TimeoutError:
                pass

    # Flushing.

    def flush(self) -> None:
        d, app = self.defs, self.app
        worker = self.worker
        for executor in worker.executors:
            ps = executor.stats
            labels: tuple[str, ...] = (app, ps.name, ps.stream)
            self._add(d.rebalances, labels, ps.rebalances)
            d.owned.labels(*labels).set(len(executor.runner.owned))
            self._add_buckets(d.processing, labels, ps.timings)
            for name, table in list(ps.tables.items()):
                where = (*labels, name)
                self._add(d.table_commits, where, table.commits)
                self._add(d.table_hits, where, table.hits)
                self._add(d.table_misses, where, table.misses)
                self._add(d.table_late, where, table.late)
                self._add(d.table_closed, where, table.closed)
            for number, part in list(ps.partitions.items()):
                where = (*labels, str(number))
                self._add(d.processed, where, part.processed)
                self._add(d.failed, where, part.failed)
                self._add(d.redelivered, where, part.redelivered)
                self._add(d.acked, where, part.acked)
        d.leader.labels(app).set(1 if worker.is_leader() else 0)
        declared = worker.job_executor.jobs if worker.job_executor is not None else {}
        for name, job in list(worker.stats.jobs.jobs.items()):
            found = declared.get(name)
            labels = (app, name, found.queue if found is not None else DEFAULT_QUEUE)
            self._add(d.started, labels, job.started)
            self._add(d.succeeded, labels, job.succeeded)
            self._add(d.retried, labels, job.retried)
            self._add(d.dead, labels, job.dead)
            self._add(d.cancelled, labels, job.cancelled)
            for limit, count in list(job.limited.items()):
                self._add(d.limited, (*labels, limit), count)
            self._add_buckets(d.run_time, labels, job.timings)
        for (of, stream), count in list(resend.duplicates.items()):
            if of == app:
                self._add(d.duplicates, (app, stream), count)
        for (of, name, queue), count in list(stats.enqueued.items()):
            if of == app:
                self._add(d.enqueued, (app, name, queue), count)
        for (of, name, queue, how), count in list(stats.ticks.items()):
            if of == app:
                self._add(d.ticks, (app, name, queue, how), count)

    def _add(self, counter: Counter, labels: tuple[str, ...], total: int) -> None:
        key = (counter, labels)
        delta = total - self._last.get(key, 0)
        if delta > 0 or key not in self._last:
            counter.labels(*labels).inc(max(delta, 0))  # 0: the series shows from the start
            self._last[key] = total

    def _add_buckets(
        self, histogram: Histogram, labels: tuple[str, ...], timings: stats.Timings
    ) -> None:
        key = (histogram, labels)
        counts, total = list(timings.counts), timings.total
        last_counts, last_total = self._last_hist.get(key, ([0] * len(counts), 0.0))
        if counts == last_counts and key in self._last_hist:
            return
        child = histogram.labels(*labels)
        # prometheus_client observes one value at a time; bucket counts gathered here are
        # added to the same per-bucket values observe() would increment (non-cumulative;
        # the +Inf bucket last), which is also what multiprocess mode writes to its files.
        for value, now, before in zip(child._buckets, counts, last_counts, strict=True):
            if now > before:
                value.inc(now - before)
        if total > last_total:
            child._sum.inc(total - last_total)
        self._last_hist[key] = (counts, total)

    # Sampling.

    async def sample(self) -> None:
        for executor in self.worker.executors:
            try:
                await self._sample_backlog(executor)
            except TransportError as exc:
                reraise_if_cancelled()
                log.debug("sampling the backlog of %s failed: %r", executor.processor.name, exc)
        job_executor = self.worker.job_executor
        if job_executor is not None:
            try:
                counts = await job_executor.store.counts(job_executor.clock.now())
            except TransportError as exc:
                reraise_if_cancelled()
                log.debug("sampling the job queue failed: %r", exc)
            else:
                d = self.defs
                for queue, c in (counts.queues or {DEFAULT_QUEUE: counts}).items():
                    d.queued.labels(self.app, queue).set(c.queued)
                    d.scheduled.labels(self.app, queue).set(c.scheduled)
                    d.executing.labels(self.app, queue).set(c.executing)
                    d.dead_letters.labels(self.app, queue).set(c.dead)
                d.cancelled_kept.labels(self.app).set(counts.cancelled)

    async def _sample_backlog(self, executor: Executor) -> None:
        """Lag, pending and lost of the partitions this worker owns (a round trip each)."""
        ps = executor.stats
        owned = sorted(executor.runner.owned)
        before = self._sampled.get(ps.name, set())
        self._sampled[ps.name] = set(owned)
        for number in before - set(owned):
            self._forget((self.app, ps.name, ps.stream, str(number)))
            self._forget_tables(executor, number)
        if not owned:
            return
        partitions = executor.processor.stream.partitions
        keys = {partitions[n].id: n for n in owned}
        admin = executor.store.admin()
        if admin is None:  # a store that cannot tell
            return
        backlog = await admin.backlog(list(keys), executor.group)
        lost = await executor.store.log.lost(list(keys), executor.group)
        quarantined = await _quarantined(executor)
        for key, (lag, pending) in backlog.items():
            where = (self.app, ps.name, ps.stream, str(keys[key]))
            if lag is not None:
                self.defs.lag.labels(*where).set(lag)
            self.defs.pending.labels(*where).set(pending)
            self.defs.lost.labels(*where).set(lost.get(key, 0))
            self.defs.quarantined.labels(*where).set(1 if key in quarantined else 0)
        tables = executor.processor.stream.tables
        store = executor.store.table_store(self.app) if tables else None
        if store is not None:
            for table in tables:
                sizes = await store.sizes(table.name, list(keys))
                windowed = getattr(table, "clock_of", None)
                for key, count in sizes.items():
                    at = (self.app, table.name, str(keys[key]))
                    if windowed is not None:
                        clock = await windowed(key)
                        count -= clock is not None
                        if clock is not None and clock.watermark > -math.inf:
                            self.defs.table_watermark.labels(*at).set(clock.watermark)
                    self.defs.table_keys.labels(*at).set(count)

    def _forget(self, labels: tuple[str, ...], gauges: Sequence[Gauge] | None = None) -> None:
        """A partition no longer ours: its owner reports it now. In multiprocess mode a
        series cannot be removed; 0 gives way to the owner's next (more recent) sample."""
        d = self.defs
        for gauge in gauges or (d.lag, d.pending, d.lost, d.quarantined):
            if self.multiprocess:
                gauge.labels(*labels).set(0)
            else:
                try:
                    gauge.remove(*labels)
                except KeyError:
                    pass

    def _forget_tables(self, executor: Executor, number: int) -> None:
        """The tables' gauges of a partition given up, unless another processor of the
        same stream in this worker still owns it (its samples carry the same labels)."""
        stream = executor.processor.stream
        for other in self.worker.executors:
            if other is not executor and other.processor.stream is stream:
                if number in other.runner.owned:
                    return
        gauges = (self.defs.table_keys, self.defs.table_watermark)
        for table in stream.tables:
            self._forget((self.app, table.name, str(number)), gauges)


async def _quarantined(executor: Executor) -> set[PartitionId]:
    """The processor's quarantined partitions; none for a store that cannot record them."""
    try:
        return set(await executor.coordination.quarantined())
    except Misconfigured:
        return set()
