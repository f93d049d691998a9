"""The executor's side of job limits: asking the store to admit a job declared with limits
before running it, and promoting the jobs it put off as soon as they are due.

A job put off goes back to the schedule, due when its next turn comes (rate) or after a
short random wait (concurrency). The periodic scheduler would move it back to the queue
up to ``job_schedule_interval`` late, so the executor that put it off also wakes its own
scheduler at that due time: a rate stays close to its limit however the scheduler runs.
Only executors with limited jobs run this (:meth:`Admissions.run`).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from runnel.exceptions import TransportError
from runnel.jobs.limits import GONE, Deferral, concurrency_wait
from runnel.runtime.retry import Backoff, outage, reraise_if_cancelled

if TYPE_CHECKING:
    from runnel.jobs.clock import Clock
    from runnel.jobs.function import JobFunction
    from runnel.jobs.model import Delivery
    from runnel.metrics.stats import JobsStats
    from runnel.store.jobs import JobStore

log = logging.getLogger("runnel.jobs")

MAX_NAP = 1.0
"""Longest sleep between looks at the clock (a ManualClock moves without telling)."""


class Admissions:
    def __init__(self, store: JobStore, executor: str, clock: Clock, stats: JobsStats) -> None:
        self.store = store
        self.executor = executor
        self.clock = clock
        self.stats = stats
        self._due: list[float] = []
        self._changed = asyncio.Event()

    async def admit(self, job: JobFunction[Any, Any], d: Delivery) -> str | None:
        """The slot the delivery holds once admitted (the job's name with a concurrency
        limit, else ''), or None if it must not run here: put off, or no longer ours."""
        assert job.limits is not None
        backoff = Backoff()
        while True:
            reraise_if_cancelled()
            try:
                verdict = await self.store.admit(
                    self.executor, d, job.limits, self.clock.now(), concurrency_wait()
                )
                break
            except TransportError as exc:
                reraise_if_cancelled(exc)
                outage.failed(f"admitting job {d.id}", exc)
                await backoff.sleep()
        if verdict is None:
            return job.name if job.limits.concurrency is not None else ""
        if isinstance(verdict, Deferral):
            counts = self.stats.job(d.name).limited
            counts[verdict.limit] = counts.get(verdict.limit, 0) + 1
            log.debug("job %s %s put off by its %s limit until %.3f", d.name, d.id,
                      verdict.limit, verdict.due)  # fmt: skip
            heapq.heappush(self._due, verdict.due)
            self._changed.set()
        elif verdict == GONE:
            log.info("job %s %s was cancelled or taken back before it started", d.name, d.id)
        return None

    async def run(self, promote: Callable[[], Awaitable[None]]) -> None:
        """Promote due jobs as soon as a job put off here is due (until cancelled)."""
        while True:
            reraise_if_cancelled()
            if not self._due:
                self._changed.clear()
                await self._changed.wait()
                continue
            wait = self._due[0] - self.clock.now()
            if wait > 0:
                self._changed.clear()
                try:
                    await asyncio.wait_for(self._changed.wait(), min(wait, MAX_NAP))
                except TimeoutError:
                    pass
                continue
            now = self.clock.now()
            while self._due and self._due[0] <= now:
                heapq.heappop(self._due)
            try:
                await promote()
            except TransportError as exc:
                reraise_if_cancelled(exc)
                outage.failed("promoting jobs put off by their limits", exc)
