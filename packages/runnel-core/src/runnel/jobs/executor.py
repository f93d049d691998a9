"""The job executor: one worker's share of the job queue.

Read top to bottom, :meth:`JobExecutor.run` is its whole life:

    prepare the store; beat once        (registered and alive before taking anything;
                                         a stop meanwhile ends the executor at once)
    until stopped, concurrently:
        fetcher      two lanes, each taking up to half the free slots' worth of jobs
                     (marked EXECUTING as they are taken), one task per job, from the
                     queues chosen, as the picker shares them out (runnel.jobs.queues)
        finisher     record outcomes in batches: each with the job's removal, atomically
        heartbeat    every timeout/3: say we are alive (and what we run)
        scheduler    every schedule interval: move due jobs (countdown, retries) to the queue
        maintenance  every timeout/2: take back the jobs of executors that stopped beating,
                     and put back deliveries held in our name that we know nothing of
        cancels      wait for the store's cancel notices; stop the jobs they name (control.py)
    stop:  take nothing more; running jobs get grace_period, then are cancelled and go
           back to the queue uncounted; outcomes are flushed; leave

At most ``concurrency`` jobs run at once: ``async def`` jobs in the event loop, plain
functions in a thread pool of that size, so they never block the loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runnel.exceptions import DecodeError, TransportError, UnknownPlugin
from runnel.jobs import codec
from runnel.jobs.admission import Admissions
from runnel.jobs.backoff import retry_delay
from runnel.jobs.context import JobContext, _current
from runnel.jobs.control import JobControls
from runnel.jobs.failures import error_info as _error_info
from runnel.jobs.finisher import Finisher
from runnel.jobs.model import Abandoned, Delivery, ErrorInfo, InvalidArguments, Outcome
from runnel.jobs.queues import DEFAULT_QUEUE, Picker, QueueSelection
from runnel.jobs.workflow import prior_inputs
from runnel.metrics.stats import JobsStats
from runnel.plugins.instruments import finish, instruments
from runnel.runtime.health import Check
from runnel.runtime.retry import (
    BLOCK_CAP_MS,
    Backoff,
    Stopped,
    cancel_and_wait,
    outage,
    reraise_if_cancelled,
    retrying,
    until_stopped,
)
from runnel.text import plural

if TYPE_CHECKING:
    from runnel.interfaces import Serializer
    from runnel.jobs.clock import Clock
    from runnel.jobs.function import JobFunction
    from runnel.store.jobs import JobStore

log = logging.getLogger("runnel.jobs")

RECOVER_BATCH = 100
PROMOTE_BATCH = 200


@dataclass(frozen=True)
class JobSettings:
    """The settings a job executor runs by (see docs/settings.md)."""

    concurrency: int = 8
    grace_period: float = 8.0
    results_ttl: float = 3600.0
    backoff_base: float = 0.5
    backoff_cap: float = 600.0
    heartbeat_timeout: float = 30.0
    schedule_interval: float = 0.25


class JobExecutor:
    def __init__(
        self,
        jobs: Mapping[str, JobFunction[Any, Any]],
        store: JobStore,
        settings: JobSettings,
        clock: Clock,
        worker: str = "",
        app: str = "",
        stats: JobsStats | None = None,
        queues: QueueSelection | None = None,
        health: Check | None = None,
    ) -> None:
        self.jobs = dict(jobs)
        self.queues = queues or QueueSelection((DEFAULT_QUEUE,))
        self.picker = Picker(self.queues)
        self.stats = stats or JobsStats()
        self.store = store
        self.settings = settings
        self.clock = clock
        self.app = app
        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.worker = worker
        self.controls = JobControls(store, self.id, clock, self.stats)
        self.finisher = Finisher(store, self.id, settings.results_ttl, self.controls.told)
        self.admissions = Admissions(store, self.id, clock, self.stats)
        self._limited = {n for n, job in self.jobs.items() if job.limits is not None}
        self.done = 0
        self.failed = 0
        self._running: dict[asyncio.Task[None], bytes] = {}
        """Each job running, with its delivery's ticket."""
        self._suspects: set[bytes] = set()
        """Tickets the store had as ours that we did not know, at the last maintenance."""
        self._held = 0
        """Slots in use: jobs running, and jobs asked for by a take in flight."""
        self._stuck = 0
        """Threads of plain-function jobs that timed out or were cancelled but still run."""
        self._slot = asyncio.Event()
        self._stopping = asyncio.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._started = clock.now()
        self.health = health or Check("jobs", settings.heartbeat_timeout, "registering")

    def __repr__(self) -> str:
        return f"<JobExecutor {self.id}>"

    def stop(self) -> None:
        """Take no more jobs; running ones get the grace period (see :meth:`run`)."""
        self._stopping.set()
        self._slot.set()

    @property
    def running(self) -> int:
        """Jobs running, with threads still busy with a job given up on."""
        return len(self._running) + self._stuck

    # The life of an executor.

    async def run(self) -> None:
        prepare = functools.partial(self.store.prepare, self.queues.names)
        try:
            for step, what in (
                (prepare, "preparing the job queue"),
                (self._beat, "registering the job executor"),
            ):
                await until_stopped(retrying(step, what), self._stopping)
        except Stopped:
            # Nothing taken yet, so nothing to hand back; a beat that landed expires.
            log.info("job executor %s stopped before it started", self.id)
            return
        log.info(
            "job executor %s running %s (concurrency %d%s)",
            self.id,
            ", ".join(sorted(self.jobs)) or "no jobs",
            self.settings.concurrency,
            "" if self.picker.plain else f", queues {self.queues.describe()}",
        )
        try:
            async with asyncio.TaskGroup() as tg:
                loops = [
                    tg.create_task(self.finisher.run(), name="job-finisher"),
                    tg.create_task(
                        self._every(self._heartbeat_interval, self._beat), name="job-heartbeat"
                    ),
                    tg.create_task(
                        self._every(self.settings.schedule_interval, self._promote),
                        name="job-scheduler",
                    ),
                    tg.create_task(
                        self._every(self.settings.heartbeat_timeout / 2, self._maintain, now=True),
                        name="job-maintenance",
                    ),
                    tg.create_task(self.controls.watch(), name="job-cancels"),
                ]
                if self._limited:  # jobs without limits never wait for an admission
                    limits = self.admissions.run(self._promote)
                    loops.append(tg.create_task(limits, name="job-limits"))
                try:
                    await self._fetch(tg)
                    await self._finish_running()
                except asyncio.CancelledError:
                    # A hard stop. The task group cancels each job once, but a job that
                    # polls Redis itself may drop that (see cancel_and_wait): insist, or
                    # the group would wait for it forever. The loops stop first, so the
                    # jobs' "put back" outcomes wait for the finisher's last_chance.
                    for task in loops:
                        task.cancel()
                    await cancel_and_wait(list(self._running))
                    raise
                self.finisher.close()
                _, late = await asyncio.wait([loops[0]], timeout=self.settings.grace_period)
                if late:
                    log.warning(
                        "%d job outcomes could not be recorded before stopping; the jobs "
                        "run again elsewhere",
                        self.finisher.pending,
                    )
                for task in loops:
                    task.cancel()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
            await self.finisher.last_chance()
            try:
                await self.store.leave(self.id)
            except TransportError as exc:
                reraise_if_cancelled()
                log.warning("%r could not unregister (its heartbeat will expire): %r", self, exc)
        log.info(
            "job executor %s stopped (%d jobs succeeded, %d tries failed)",
            self.id,
            self.done,
            self.failed,
        )

    async def _fetch(self, tg: asyncio.TaskGroup) -> None:
        """Take jobs while slots are free, until stopped: two lanes, each asking for at most
        half the slots, so that Redis prepares one batch while the other batch runs."""
        async with asyncio.TaskGroup() as lanes:
            for n in range(2):
                lanes.create_task(self._lane(tg), name=f"job-fetch-{n}")

    async def _lane(self, tg: asyncio.TaskGroup) -> None:
        backoff = Backoff()
        limit = self.settings.concurrency
        share = max(1, (limit + 1) // 2)
        while not self._stopping.is_set():
            reraise_if_cancelled()
            want = min(limit - self._held, share)
            if want <= 0:
                self._slot.clear()
                await self._slot.wait()
                continue
            self._held += want  # reserved while asking, so the other lane asks for the rest
            plan = self.picker.plan(want)
            try:
                taken = await self.store.take(self.id, want, BLOCK_CAP_MS, self.clock, plan)
            except TransportError as exc:
                self._held -= want
                reraise_if_cancelled(exc)
                outage.failed("taking jobs", exc)
                await backoff.sleep()
                continue
            finally:
                self._slot.set()  # the other lane may ask for what this one did not get
            self._held -= want - len(taken)
            self.picker.taken(plan, taken)
            backoff.reset()
            if self._stopping.is_set():
                # Taken as we were told to stop: straight back, as they were.
                now = self.clock.now()
                for d in taken:
                    self._held -= 1
                    self.finisher.add(Outcome("release", d.ticket, d.id, now, uncount=True))
                return
            for delivery in taken:
                task = tg.create_task(self._run(delivery), name=f"job-{delivery.id}")
                self._running[task] = delivery.ticket
                task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)
        self._held -= 1
        self._slot.set()

    async def _finish_running(self) -> None:
        """Let running jobs finish within the grace period; cancel the rest (each then goes
        back to the queue, its try not counted)."""
        if not self._running:
            return
        running = list(self._running)
        log.info(
            "waiting up to %ss for %s",
            self.settings.grace_period,
            plural(len(running), "running job"),
        )
        _, late = await asyncio.wait(running, timeout=self.settings.grace_period)
        if late:
            log.warning(
                "%d jobs did not finish within %ss; cancelling them (they go back to the queue)",
                len(late),
                self.settings.grace_period,
            )
            await cancel_and_wait(late)

    # One job.

    async def _run(self, d: Delivery) -> None:
        job = self.jobs.get(d.name)
        if job is None:
            known = ", ".join(sorted(self.jobs)) or "none"
            error = ErrorInfo(
                "UnknownJob", f"no job named {d.name!r} in app {self.app!r} (known: {known})"
            )
            log.error("job %s: %s", d.id, error.message)
            self.stats.job(d.name).dead += 1
            self.finisher.add(self._dead(d, error, result=d.results))
            return
        signals = self.controls.begin(d)
        if signals.cancelled.is_set():
            return  # cancelled before it started: it must not run
        slot = ""
        if d.name in self._limited:
            try:
                admitted = await self.admissions.admit(job, d)
            except asyncio.CancelledError:
                if not signals.cancelled.is_set():  # our stop: back, try uncounted
                    now = self.clock.now()
                    self.finisher.add(
                        Outcome("release", d.ticket, d.id, now, uncount=True, slot=d.name)
                    )
                self.controls.end(d.id)
                raise
            if admitted is None:  # put off by a limit, or no longer ours
                self.controls.end(d.id)
                return
            slot = admitted
        stats = self.stats.job(d.name)
        stats.started += 1
        started = time.perf_counter()
        token = _current.set(JobContext(d.id, d.name, d.tries, d.retries, signals))
        try:
            outcome = await self._attempt(job, d)
        except asyncio.CancelledError:
            if not signals.cancelled.is_set():  # by our graceful stop: back, try uncounted
                now = self.clock.now()
                self.finisher.add(Outcome("release", d.ticket, d.id, now, uncount=True, slot=slot))
            raise
        finally:
            _current.reset(token)
            self.controls.end(d.id)
        if signals.cancelled.is_set():
            return  # its status is CANCELLED and its delivery ended: an outcome is refused
        stats.finished(outcome.kind, time.perf_counter() - started)
        outcome.slot = slot
        self.finisher.add(outcome)

    async def _attempt(self, job: JobFunction[Any, Any], d: Delivery) -> Outcome:
        try:
            # The codec the job was stored with: an enqueuing app may declare another.
            serializer = job.serializer if d.codec == job.codec else codec.serializer_named(d.codec)
            decoded, kwargs, headers, wanted = codec.decode_call(serializer, d.payload)
            if wanted is not None:  # a workflow's job: its predecessors' results first
                try:
                    decoded = [*await prior_inputs(self.store, wanted), *decoded]
                except DecodeError:
                    raise
                except Exception as exc:  # the store: try again later
                    return self._failure(job, d, _error_info(exc))
            args: tuple[Any, ...] | list[Any] = decoded
            if job.signature.trivial:
                job.signature.check(decoded, kwargs)
            else:
                args, kwargs = job.signature.convert(decoded, kwargs)
        except (DecodeError, InvalidArguments, UnknownPlugin) as exc:
            # It would fail the same way every time: no retries.
            log.error("job %s %s cannot run: %s", job.name, d.id, exc)
            return self._dead(d, _error_info(exc), result=d.results)
        running = instruments().job_running
        done = None if running is None else running(job=job, delivery=d, headers=headers)
        if not done:  # no plugin's (tracing) span: runnel-otel with tracing off, or none
            return await self._try(job, d, serializer, args, kwargs)
        try:
            outcome = await self._try(job, d, serializer, args, kwargs)
        except BaseException as exc:
            finish(done, None, exc)
            raise
        finish(done, outcome, None)
        return outcome

    async def _try(
        self,
        job: JobFunction[Any, Any],
        d: Delivery,
        serializer: Serializer,
        args: Any,
        kwargs: dict[str, Any],
    ) -> Outcome:
        """Call the job once and turn how it ended into an outcome."""
        deadline: asyncio.Timeout | None = None
        try:
            if job.timeout is None:
                value = await self._call(job, args, kwargs)
            else:
                async with asyncio.timeout(job.timeout) as deadline:
                    value = await self._call(job, args, kwargs)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            return self._failure(job, d, ErrorInfo("CancelledError", "the job was cancelled"))
        except TimeoutError as exc:
            info = _error_info(exc)
            if deadline is None or not deadline.expired():
                return self._failure(job, d, info)  # the job's own TimeoutError
            # Its own timeout: the stack only shows where asyncio cut it short, so the log
            # gets one line (the stack at debug level); the stored error keeps it.
            message = info.message or f"did not finish within {job.timeout}s"
            info = ErrorInfo("TimeoutError", message, info.traceback)
            return self._failure(job, d, info, stack=False)
        except Exception as exc:  # user code: the job failed, retried as it says
            return self._failure(job, d, _error_info(exc))
        self.done += 1
        try:
            result = codec.result_item(serializer, value) if d.results else None
        except Exception as exc:  # the job's return value or its serializer
            log.error("job %s %s returned a value that cannot be stored: %r", job.name, d.id, exc)
            error = ErrorInfo("EncodeError", f"cannot encode the return value: {exc}")
            return self._dead(d, error, result=d.results)
        return Outcome("success", d.ticket, d.id, self.clock.now(), result=result)

    async def _call(self, job: JobFunction[Any, Any], args: Any, kwargs: dict[str, Any]) -> Any:
        if job.is_async:
            return await job.func(*args, **kwargs)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self.settings.concurrency, thread_name_prefix="runnel-job"
            )
        call = functools.partial(job.func, *args, **kwargs)
        running = self._pool.submit(contextvars.copy_context().run, call)
        try:
            return await asyncio.wrap_future(running)
        except BaseException:
            if not running.done():
                # Timed out or cancelled, but a thread cannot be stopped: its slot stays
                # taken until it returns, so the pool always has a thread for a new job.
                self._held += 1
                self._stuck += 1
                loop = asyncio.get_running_loop()
                running.add_done_callback(lambda _: loop.call_soon_threadsafe(self._thread_done))
            raise

    def _thread_done(self) -> None:
        self._held -= 1
        self._stuck -= 1
        self._slot.set()

    def _failure(
        self, job: JobFunction[Any, Any], d: Delivery, error: ErrorInfo, stack: bool = True
    ) -> Outcome:
        """A failed try: retried or dead. ``stack=False`` logs one line, and the traceback
        only at debug level (a timeout's stack is asyncio's, not the job's news)."""
        self.failed += 1
        now = self.clock.now()
        shown = f"\n{error.traceback}" if stack and error.traceback else ""
        if not stack and error.traceback:
            log.debug("job %s %s was stopped at:\n%s", job.name, d.id, error.traceback)
        if d.tries <= d.retries:
            delay = retry_delay(d.tries, self.settings.backoff_base, self.settings.backoff_cap)
            log.warning(
                "job %s %s failed (try %d of %d), retrying in %.1fs: %s%s",
                job.name,
                d.id,
                d.tries,
                d.retries + 1,
                delay,
                error.one_line(),
                shown,
            )
            return Outcome("retry", d.ticket, d.id, now, error=error, due=now + delay)
        log.error(
            "job %s %s failed (try %d of %d), giving up: %s%s",
            job.name,
            d.id,
            d.tries,
            d.retries + 1,
            error.one_line(),
            shown,
        )
        return self._dead(d, error, result=d.results)

    def _dead(self, d: Delivery | Abandoned, error: ErrorInfo, result: bool) -> Outcome:
        item = codec.error_item(error) if result else None
        return Outcome("dead", d.ticket, d.id, self.clock.now(), result=item, error=error)

    # Background loops.

    @property
    def _heartbeat_interval(self) -> float:
        return self.settings.heartbeat_timeout / 3

    async def _every(self, interval: float, action: Any, now: bool = False) -> None:
        """Run ``action`` every ``interval`` seconds; a failure is logged and tried again."""
        if not now:
            await asyncio.sleep(interval)
        while True:
            reraise_if_cancelled()
            try:
                await action()
            except TransportError as exc:
                reraise_if_cancelled(exc)
                outage.failed(f"{self!r}: {action.__name__.strip('_')}", exc)
            await asyncio.sleep(interval)

    async def _beat(self) -> None:
        info = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "worker": self.worker,
            "concurrency": self.settings.concurrency,
            "queues": str(self.queues),
            "running": self.running,
            "done": self.done,
            "failed": self.failed,
            "started": self._started,
        }
        await self.health.watch(self.store.beat(self.id, info, self.settings.heartbeat_timeout))

    async def _promote(self) -> None:
        while await self.store.promote_due(self.clock.now(), PROMOTE_BATCH) >= PROMOTE_BATCH:
            reraise_if_cancelled()

    async def _maintain(self) -> None:
        """Take back the jobs of executors whose heartbeat expired; then our own orphans."""
        for state in await self.store.executors():
            if state.alive or state.id == self.id:
                continue
            await self._recover(state.id)
        await self._put_back_orphans()

    async def _put_back_orphans(self) -> None:
        """Deliveries the store has as ours that we neither run nor hold an outcome for.

        Their outcome was recorded and then lost: a Redis failover drops the writes its
        replica had not received yet. Nobody else takes them back while we beat, so they
        would stay EXECUTING for as long as this worker lives. They go back to the queue,
        the try not counted (it did not fail; its outcome is unknown). A take in flight
        holds deliveries we do not know of yet, so only a ticket unknown at two
        maintenances in a row counts as an orphan.
        """
        if self._stopping.is_set():
            return
        held = await self.store.abandoned(self.id, self.settings.concurrency + RECOVER_BATCH)
        known = set(self._running.values()) | self.finisher.tickets()
        unknown = {a.ticket for a in held if a.ticket not in known}
        orphans = [a for a in held if a.ticket in unknown and a.ticket in self._suspects]
        self._suspects = unknown - {a.ticket for a in orphans}
        if not orphans:
            return
        now = self.clock.now()
        for a in orphans:
            slot = self._slot_of(a.name)
            self.finisher.add(Outcome("release", a.ticket, a.id, now, uncount=a.started, slot=slot))
        log.warning(
            "%d jobs were held in this worker's name though it was not running them (an "
            "outcome lost, as in a Redis failover); they go back to the queue: %s",
            len(orphans),
            ", ".join(a.id for a in orphans[:10]) + (" ..." if len(orphans) > 10 else ""),
        )

    async def _recover(self, executor: str) -> None:
        recovered = 0
        while True:
            abandoned = await self.store.abandoned(executor, RECOVER_BATCH)
            if not abandoned:
                break
            outcomes = [self._abandoned(executor, a) for a in abandoned]
            for a, outcome in zip(abandoned, outcomes, strict=True):
                outcome.slot = self._slot_of(a.name)  # freed with the outcome, if held
            refused = await self.store.finish(
                executor, outcomes, self.settings.results_ttl, only_if_dead=True
            )
            for a, outcome in zip(abandoned, outcomes, strict=True):
                if a.id not in refused:
                    self.stats.job(a.name).finished(outcome.kind)
            recovered += len(outcomes) - len(refused)
            if len(refused) == len(outcomes):
                break  # it is alive again, or another executor got there first
        if await self.store.forget(executor) or recovered:
            log.warning(
                "job executor %s stopped beating; took back %d of its jobs", executor, recovered
            )

    def _slot_of(self, name: str) -> str:
        """The slot a delivery of this job may hold: its name if it has a concurrency limit."""
        job = self.jobs.get(name)
        limits = job.limits if job is not None else None
        return name if limits is not None and limits.concurrency is not None else ""

    def _abandoned(self, executor: str, a: Abandoned) -> Outcome:
        now = self.clock.now()
        if not a.started:
            return Outcome("release", a.ticket, a.id, now)
        error = ErrorInfo("WorkerLost", f"the worker running it stopped (executor {executor})")
        if a.tries <= a.retries:
            delay = retry_delay(a.tries, self.settings.backoff_base, self.settings.backoff_cap)
            return Outcome("retry", a.ticket, a.id, now, error=error, due=now + delay)
        log.error("job %s %s: its worker died on its last try; it is DEAD", a.name, a.id)
        return self._dead(a, error, result=a.results)
