"""The executor's side of cancelling a running job and of its progress reports.

A cancel is recorded by the store in one step (:meth:`JobStore.cancel`): the job is
CANCELLED and its delivery ended there, so whatever the worker reports afterwards is
refused. For a job that was running, the store also tells the executor running it: it
appends the id to that executor's cancel notices (in Redis a list per executor, in the
app's hash tag, so one slot on a cluster too), and :meth:`JobControls.watch` waits on them
with a blocking read. The job's task is then cancelled: an ``async def`` job gets
``CancelledError`` at its next ``await``; a plain ``def`` job cannot be interrupted in its
thread, so it sees ``current_job().cancelled`` turn True and is expected to return.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import TYPE_CHECKING

from runnel.exceptions import TransportError
from runnel.jobs.context import JobSignals
from runnel.jobs.model import Delivery, Progress
from runnel.runtime.retry import (
    BLOCK_CAP_MS,
    Backoff,
    cancel_and_wait,
    outage,
    reraise_if_cancelled,
)

if TYPE_CHECKING:
    from runnel.jobs.clock import Clock
    from runnel.metrics.stats import JobsStats
    from runnel.store.jobs import JobStore

log = logging.getLogger("runnel.jobs")

REMEMBER_TOLD = 300.0
"""How long (s) a notice for a job this executor does not run is kept: its take may not
have answered yet, and it must not start once it does."""


class JobControls:
    """The cancel flags of the jobs one executor runs, and the loop that hears of cancels."""

    def __init__(self, store: JobStore, executor: str, clock: Clock, stats: JobsStats) -> None:
        self.store = store
        self.executor = executor
        self.clock = clock
        self.stats = stats
        self._running: dict[str, tuple[JobSignals, asyncio.Task[None], str]] = {}
        self._told: dict[str, float] = {}
        """Ids cancelled while not running here (yet, or any more), by when they were told."""
        self._stopping: set[asyncio.Task[None]] = set()

    def begin(self, d: Delivery) -> JobSignals:
        """The signals of a job starting in this task; already cancelled if told so first
        (the job must then not run)."""
        task = asyncio.current_task()
        assert task is not None
        signals = JobSignals(task.get_loop(), functools.partial(self._report, d.id, d.tries))
        if self._told.pop(d.id, None) is not None:
            signals.cancelled.set()
            self.stats.job(d.name).cancelled += 1
        else:
            self._running[d.id] = (signals, task, d.name)
        return signals

    def end(self, job_id: str) -> None:
        self._running.pop(job_id, None)

    def told(self, job_id: str) -> bool:
        """Whether this job was cancelled and nothing of ours runs it (its outcome, if any,
        is refused by the store, as expected)."""
        return job_id in self._told

    async def watch(self) -> None:
        """Until cancelled: wait for cancel notices and stop the jobs they name."""
        backoff = Backoff()
        while True:
            reraise_if_cancelled()
            try:
                told = await self.store.cancelled(self.executor, BLOCK_CAP_MS / 1000)
            except TransportError as exc:
                reraise_if_cancelled(exc)
                outage.failed(f"job executor {self.executor}: reading cancels", exc)
                await backoff.sleep()
                continue
            backoff.reset()
            for job_id in told:
                self.cancel(job_id)

    def cancel(self, job_id: str) -> None:
        """Stop a job the store has cancelled (its status is CANCELLED already)."""
        running = self._running.pop(job_id, None)
        if running is None:
            now = time.monotonic()
            for old in [j for j, at in self._told.items() if at < now - REMEMBER_TOLD]:
                del self._told[old]
            self._told[job_id] = now
            return
        signals, task, name = running
        signals.cancelled.set()
        self.stats.job(name).cancelled += 1
        log.info("job %s %s was cancelled; stopping it", name, job_id)
        # Again until it ends: a job polling Redis can drop one cancellation
        # (see cancel_and_wait); a def job's thread is left to see its flag.
        stopping = asyncio.get_running_loop().create_task(cancel_and_wait([task]))
        self._stopping.add(stopping)
        stopping.add_done_callback(self._stopping.discard)

    async def _report(self, job_id: str, tries: int, fraction: float, message: str) -> None:
        progress = Progress(fraction, message, self.clock.now(), tries)
        try:
            await self.store.report_progress(self.executor, job_id, progress)
        except TransportError as exc:
            reraise_if_cancelled(exc)
            outage.failed(f"storing the progress of job {job_id}", exc)
