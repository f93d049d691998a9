"""The worker: one process running processors' executors, the job executor and background
tasks until told to stop."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from runnel import context
from runnel.exceptions import Misconfigured, TransportError
from runnel.jobs.queues import QueueSelection, choose
from runnel.metrics.stats import WorkerStats
from runnel.metrics.switch import wanted
from runnel.processing.executor import Executor
from runnel.runtime.health import Health, reporting_to
from runnel.runtime.heap import resume_collections
from runnel.runtime.retry import (
    FATAL,
    Stopped,
    cancel_and_wait,
    outage,
    reraise_if_cancelled,
    until_stopped,
)
from runnel.services import Services
from runnel.urls import redact

if TYPE_CHECKING:
    from runnel.background import BackgroundTask
    from runnel.jobs.executor import JobExecutor
    from runnel.jobs.function import JobFunction
    from runnel.jobs.periodic import CronScheduler
    from runnel.metrics.runtime import WorkerMetrics
    from runnel.processor import Processor, Processors
    from runnel.runtime.probes import Server
    from runnel.store.coordination import Leadership

log = logging.getLogger("runnel.worker")

RESIGN_WITHIN = 1.0
"""Seconds a stopping leader waits for its resignation to be stored; else its claim
expires (three poll intervals)."""


class Runnable(Services, Protocol):
    """What a worker runs: an app's services and what it declares (:class:`runnel.App`)."""

    @property
    def processors(self) -> Processors: ...

    @property
    def jobs(self) -> Mapping[str, JobFunction[Any, Any]]: ...

    @property
    def background(self) -> Sequence[BackgroundTask]: ...


class Worker:
    """Runs the app's processors (or a chosen subset), its job queue and background tasks.

    ``SIGINT``/``SIGTERM`` start a graceful stop: no more fetching, in-flight iterations
    get their ``grace_period``, finished events are acknowledged, and :meth:`run` returns
    0. A second signal cancels everything at once. A ``HALT`` failure stops the worker the
    same graceful way and :meth:`run` returns 1.
    """

    def __init__(
        self,
        app: Runnable,
        processors: Sequence[Processor] | None = None,
        *,
        jobs: bool = True,
        concurrency: int | None = None,
        queues: str | QueueSelection | None = None,
    ) -> None:
        self.app = app
        self.processors = list(app.processors.values()) if processors is None else list(processors)
        self.health = Health(app.settings.liveness_timeout)
        """What ``/healthz`` and ``/readyz`` answer (runnel.runtime.health)."""
        self._reached = self.health.check(
            "store", app.settings.leadership_poll_interval * 3 / 1000, "connecting"
        )
        """The leadership claims: every worker makes them, so they say it reaches the store."""
        self.metrics: WorkerMetrics | None = None
        if wanted(app.settings):
            from runnel.metrics.runtime import WorkerMetrics  # prometheus_client: only if asked

            self.metrics = WorkerMetrics(self)
        self.stats = WorkerStats(enabled=self.metrics is not None)
        self.executors = [Executor(self, p) for p in self.processors]
        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.job_executor: JobExecutor | None = None
        if jobs and app.jobs:
            # Imported only for an app with jobs: a worker of streams alone starts sooner.
            from runnel.jobs.executor import JobExecutor, JobSettings

            s = app.settings
            settings = JobSettings(
                concurrency=concurrency or s.job_concurrency,
                grace_period=s.default_grace_period,
                results_ttl=s.results_ttl,
                backoff_base=s.job_backoff_base,
                backoff_cap=s.job_backoff_cap,
                heartbeat_timeout=s.job_heartbeat_timeout,
                schedule_interval=s.job_schedule_interval,
            )
            try:
                chosen = choose(app.jobs.values(), queues or s.job_queues, app.name)
            except ValueError as exc:
                raise Misconfigured(str(exc)) from None
            self.job_executor = JobExecutor(
                app.jobs,
                app.job_store,
                settings,
                app.clock,
                worker=self.id,
                app=app.name,
                stats=self.stats.jobs,
                queues=chosen,
                health=self.health.check("jobs", s.job_heartbeat_timeout, "registering"),
            )
        self.periodic: CronScheduler | None = None
        """Enqueues the periodic jobs' ticks, beside the job executor (none lead: each
        worker that runs one races the others for each tick)."""
        if self.job_executor is not None and any(j.periodic for j in app.jobs.values()):
            from runnel.jobs.periodic import CronScheduler

            self.periodic = CronScheduler(
                app.jobs.values(),
                app.job_store,
                app.clock,
                app=app.name,
                grace=app.settings.job_cron_grace,
                interval=app.settings.job_schedule_interval,
            )
        self.exit_code = 0
        self.failure: BaseException | None = None
        """The first exception a HALT processor raised (see App.run_worker's halt_raises)."""
        self._stopping = asyncio.Event()
        self._signals = 0
        self._leading = False

    def is_leader(self) -> bool:
        """Whether this worker is the app's elected leader right now."""
        return self._leading

    def stop(self, exit_code: int = 0, reason: str = "stop requested") -> None:
        if self._stopping.is_set():
            self.exit_code = max(self.exit_code, exit_code)
            return
        log.info("worker stopping: %s", reason)
        self.exit_code = exit_code
        self.health.stopping = True
        self._stopping.set()
        for executor in self.executors:
            executor.stop()
        if self.job_executor is not None:
            self.job_executor.stop()

    async def run(self) -> int:
        context.worker_id.set(self.id)
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        installed = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig, main)
                installed.append(sig)
            except (NotImplementedError, RuntimeError):  # not the main thread
                pass
        outage.where = redact(self.app.settings.redis_url)
        supervisor = reporting_to()
        ticking = asyncio.create_task(self.health.tick(supervisor), name="health")
        probes: Server | None = None
        try:
            # Frozen before connecting: the collector, if ``runnel worker`` paused it for
            # its start, is on again from here (runnel.runtime.heap).
            with frozen_heap(self.app.settings.gc_freeze):
                async with self.app.connected():
                    if self.metrics is not None:
                        self.metrics.start(self.health)
                    if supervisor is None:
                        probes = self._serve_probes()
                    await self._run()
        except BaseExceptionGroup as group:
            # A refusal no retry can fix (wrong credentials) ended a loop: say that, plainly.
            # Otherwise a bug did (only store failures are retried): the worker stops on it,
            # and raises it as itself rather than wrapped in the task groups it crossed.
            fatal = _first_fatal(group) or _first_failure(group)
            if fatal is None:
                raise
            raise fatal from None
        finally:
            if probes is not None:
                probes.close()
            await cancel_and_wait([ticking])
            if self.metrics is not None:
                self.metrics.close()  # a last flush: everything counted is exported
            for sig in installed:
                loop.remove_signal_handler(sig)
        return self.exit_code

    def _serve_probes(self) -> Server | None:
        """The probes on their own port (``health_port``), unless the metrics' port is
        the same one: it serves them already."""
        settings = self.app.settings
        port = settings.health_port
        if port is None or (self.metrics is not None and port == settings.metrics_port):
            return None
        from runnel.runtime.probes import probes_app, serve

        server = serve(probes_app(self.health), port, settings.health_host, "health probes")
        log.info(
            "serving health probes on http://%s:%d/healthz and /readyz",
            settings.health_host,
            server.port,
        )
        return server

    async def _run(self) -> None:
        everywhere = [j for j in self.app.background if not j.on_leader]
        on_leader = [j for j in self.app.background if j.on_leader]
        log.info(
            "worker %s starting: app=%s processors=%s jobs=%s background tasks=%d",
            self.id,
            self.app.name,
            ",".join(p.name for p in self.processors) or "-",
            ",".join(self.app.jobs) if self.job_executor is not None else "-",
            len(self.app.background),
        )
        async with asyncio.TaskGroup() as tg:
            running = [tg.create_task(e.run(), name=repr(e)) for e in self.executors]
            if self.job_executor is not None:
                running.append(tg.create_task(self.job_executor.run(), name="job-executor"))
            if self.periodic is not None:
                running.append(
                    tg.create_task(self.periodic.run(self._stopping), name="periodic-jobs")
                )
            background = [tg.create_task(self._job(j), name=j.name) for j in everywhere]
            leading = tg.create_task(self._lead(on_leader), name="leadership")
            if self.metrics is not None:
                tg.create_task(self.metrics.run(self._stopping), name="metrics")
            await self._stopping.wait()
            await asyncio.gather(*running, return_exceptions=True)
            await self._finish_jobs([*background, leading])
        log.info("worker stopped")

    async def _lead(self, jobs: list[BackgroundTask]) -> None:
        """Take part in the app's leader election; run ``on_leader`` jobs while leading.

        The leader key expires after three poll intervals, so when a leader dies another
        worker takes over within about that long. A leader that cannot renew its claim
        stops its leader jobs at once rather than risk two leaders.
        """
        election = self.app.store.leadership(self.app.name)
        interval = self.app.settings.leadership_poll_interval / 1000
        ttl_ms = int(interval * 3000)
        work: asyncio.Task[None] | None = None
        held = False
        try:
            while not self._stopping.is_set():
                reraise_if_cancelled()
                try:
                    leading = await until_stopped(election.claim(self.id, ttl_ms), self._stopping)
                    self._reached.ok()
                except Stopped:
                    break
                except TransportError as exc:
                    reraise_if_cancelled(exc)
                    outage.failed("leader election", exc)
                    self._reached.failed(exc)
                    leading = False
                held = held or leading
                if leading and work is None:
                    log.info("worker %s is the leader of %s", self.id, self.app.name)
                    work = asyncio.create_task(self._leader_jobs(jobs), name="leader-jobs")
                elif not leading and work is not None:
                    log.info("worker %s is no longer the leader", self.id)
                    await cancel_and_wait([work])
                    work = None
                self._leading = leading
                try:
                    async with asyncio.timeout(interval):
                        await self._stopping.wait()
                except TimeoutError:
                    pass
        finally:
            self._leading = False
            if work is not None:
                # Stopping: leader jobs finish their run in flight, as other jobs do.
                await self._finish_jobs([work])
                await asyncio.gather(work, return_exceptions=True)
            if held:
                await self._resign(election)

    async def _resign(self, election: Leadership) -> None:
        """Give the leadership up, so that another worker need not wait for it to expire:
        a courtesy, so a store that does not answer at once does not hold the stop."""
        try:
            async with asyncio.timeout(RESIGN_WITHIN):
                await election.resign(self.id)
        except (TransportError, TimeoutError) as exc:
            reraise_if_cancelled()
            log.debug("resigning the leadership failed (it will expire): %r", exc)

    async def _leader_jobs(self, jobs: list[BackgroundTask]) -> None:
        async with asyncio.TaskGroup() as tg:
            for job in jobs:
                tg.create_task(self._job(job), name=job.name)

    async def _job(self, job: BackgroundTask) -> None:
        await job.run(self._stopping)

    async def _finish_jobs(self, tasks: list[asyncio.Task[None]]) -> None:
        pending = [t for t in tasks if not t.done()]
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=self.app.settings.default_grace_period)
        await cancel_and_wait(late)

    def _on_signal(self, sig: signal.Signals, main: asyncio.Task[None] | None) -> None:
        self._signals += 1
        if self._signals == 1:
            self.stop(reason=f"received {sig.name}")
        else:
            log.warning("received %s again: cancelling everything now", sig.name)
            self.exit_code = 1
            if main is not None:
                main.cancel()


def _first_fatal(group: BaseExceptionGroup[BaseException]) -> Exception | None:
    for exc in group.exceptions:
        if isinstance(exc, FATAL):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first_fatal(exc)
            if found is not None:
                return found
    return None


def _first_failure(group: BaseExceptionGroup[BaseException]) -> Exception | None:
    for exc in group.exceptions:
        found = _first_failure(exc) if isinstance(exc, BaseExceptionGroup) else exc
        if isinstance(found, Exception):
            return found
    return None


_freezers = 0


@contextlib.contextmanager
def frozen_heap(enabled: bool) -> Iterator[None]:
    """Keep what is alive at start (modules, the app, pydantic's validators: tens of
    thousands of objects) out of the garbage collector's full passes while the worker runs.

    Draining a backlog allocates fast, so Python runs full collections every second or
    so, and each one walked that whole start-up heap: measured at 40-50 ms a pass, about a
    quarter of a worker's time, and the worst latency spikes. Frozen objects are still
    freed by reference counting; only cycles among them (start-up garbage included) wait
    until the worker stops and the heap is thawed (workers sharing a process thaw it when
    the last one stops). No collection first: it would cost every start that much.
    """
    global _freezers
    if not enabled:
        resume_collections()
        yield
        return
    if not _freezers:
        gc.freeze()
    # After the freeze: the start-up heap is never walked, not even by a first young pass.
    resume_collections()
    _freezers += 1
    try:
        yield
    finally:
        _freezers -= 1
        if not _freezers:
            gc.unfreeze()
