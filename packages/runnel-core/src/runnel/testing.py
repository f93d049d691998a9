"""Testing an app: run its processors and jobs inside a test, with no server.

::

    async def test_orders_are_totalled() -> None:
        async with runnel.testing.run(app) as t:
            await orders.send(Order(id=1, amount=5))
            await t.processed()                    # every event sent is acknowledged
            assert [o.id for o in await t.acknowledged("totals")] == [1]

With pytest, such ``async def`` tests need pytest-asyncio and, in ``pyproject.toml``::

    [tool.pytest.ini_options]
    asyncio_mode = "auto"

:func:`run` points the app at a fresh in-memory store (``memory://``) for the length of
the block, leaving the app's module as it was, and runs a real :class:`Worker` in the
test's event loop: the same code as in production, the same store semantics (partitions,
consumer groups, pending entries, locks, heartbeats), only without a server. Give
``store=`` a ``redis://`` URL to run the same test on a real Redis.

What the test can do meanwhile: send events and enqueue jobs as the app does
(``await stream.send(...)``, ``await job.delay(...)``); wait until everything is
processed (:meth:`TestRun.processed`) or every job finished (:meth:`TestRun.join`); look
at what each processor acknowledged, at failures, the job queue and its dead letters; start
more workers and stop them, gracefully or hard (as if the process died). A processor
failure that halts a worker is raised in the test by the next wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import uuid
import weakref
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from runnel.exceptions import RunnelError
from runnel.jobs.clock import Clock
from runnel.jobs.model import DeadLetter, QueueCounts
from runnel.memory.server import forget as forget_store
from runnel.processor import Processor
from runnel.record import Record
from runnel.runtime.worker import Worker
from runnel.store.backend import admin_of
from runnel.store.log import PartitionId
from runnel.testlog import Failure, FailureLog

if TYPE_CHECKING:
    from runnel.app import App
    from runnel.store.jobs import JobStore
    from runnel.stream import Stream

__all__ = [
    "Failure",
    "NotDone",
    "SyncTestRun",
    "TestRun",
    "WorkerHalted",
    "memory_url",
    "run",
    "run_sync",
]

T = TypeVar("T")

WAIT = 30.0
"""How long a wait may take by default before the test is told it never finished."""

FAST_PROCESSORS: Mapping[str, Any] = {"read_timeout": 50, "join_delay": 0}
"""Processor timings that only cut latency (shorter blocking reads, no wait for other
workers before taking partitions), so a test does not sit out production's delays."""

FAST_SETTINGS: Mapping[str, Any] = {"job_schedule_interval": 0.05}
"""Likewise for the job queue: due jobs are moved to the queue sooner."""


class NotDone(RunnelError, AssertionError):
    """A wait ran out of time: something sent was never processed (the message says what)."""


class WorkerHalted(RunnelError, AssertionError):
    """A worker stopped on its own (a processor failed under ``ExceptionPolicy.HALT``, or
    it could not run); the processor's exception, if any, is the ``__cause__``."""


def memory_url() -> str:
    """A fresh in-memory store's URL: nothing else in the process uses this name."""
    return f"memory://test-{uuid.uuid4().hex[:12]}"


@dataclass
class _Running:
    worker: Worker
    task: asyncio.Task[int]
    names: list[str] = field(default_factory=list)


class TestRun:
    """The app running inside a test (made by :func:`run`)."""

    __test__ = False  # not a pytest test class, despite its name

    def __init__(
        self,
        app: App,
        url: str,
        processors: Mapping[str, Processor],
        failures: FailureLog,
        wait: float,
    ) -> None:
        self.app = app
        self.url = url
        """The store the app uses during the run."""
        self.processors = dict(processors)
        """The processors as run (with test timings), by id (``app.stream.name``)."""
        self.wait = wait
        self._failures = failures
        self._running: list[_Running] = []
        self._halted: list[tuple[Worker, int]] = []

    def _named(self, key: str) -> list[Processor]:
        """The processors ``key`` names: an id, or a name (several streams may share it)."""
        if key in self.processors:
            return [self.processors[key]]
        return [p for p in self.processors.values() if p.name == key]

    def _processor(self, key: str | Processor) -> Processor:
        if not isinstance(key, str):
            return self.processors[key.id]
        found = self._named(key)
        if len(found) != 1:
            ids = ", ".join(p.id for p in found) or "none"
            raise KeyError(f"{key!r} names {len(found)} processors of {self.app.name} ({ids})")
        return found[0]

    def __repr__(self) -> str:
        return f"<TestRun {self.app.name} on {self.url} workers={len(self.workers)}>"

    # Workers.

    @property
    def workers(self) -> list[Worker]:
        """The workers running now, oldest first."""
        return [r.worker for r in self._running if not r.task.done()]

    async def start_worker(
        self,
        processors: Sequence[str] | None = None,
        *,
        jobs: bool = True,
        concurrency: int | None = None,
    ) -> Worker:
        """Start one more worker in this loop (all processors, or those named; ``jobs``:
        whether it runs job executors). Several workers share the partitions between them
        as workers in separate processes do."""
        if processors is None:
            chosen = list(self.processors.values())
        else:
            unknown = [n for n in processors if not self._named(n)]
            if unknown:
                raise KeyError(f"no processor named {', '.join(unknown)} in app {self.app.name}")
            chosen = list({p.id: p for n in processors for p in self._named(n)}.values())
        names = [p.id for p in chosen]
        worker = Worker(self.app, chosen, jobs=jobs, concurrency=concurrency)
        task = asyncio.create_task(worker.run(), name=f"test-worker-{worker.id}")
        self._running.append(_Running(worker, task, names))
        return worker

    async def stop_worker(self, worker: Worker | None = None, *, hard: bool = False) -> int:
        """Stop a worker (the newest by default) and wait for it; its exit code.

        Gracefully by default: in-flight events finish and are acknowledged, running jobs
        get their grace period. ``hard=True`` cancels it at once, as a second signal
        does: nothing more is acknowledged, so what it was processing is delivered again
        to the next owner (at-least-once).
        """
        running = self._find(worker)
        if hard:
            await _cancel_hard(running.worker, running.task)
            self._running.remove(running)
            return 1
        running.worker.stop()
        code = await asyncio.shield(running.task)
        self._running.remove(running)
        return code

    def _find(self, worker: Worker | None) -> _Running:
        alive = [r for r in self._running if not r.task.done()] or self._running
        if not alive:
            raise RuntimeError("no worker is running")
        if worker is None:
            return alive[-1]
        for r in self._running:
            if r.worker is worker:
                return r
        raise ValueError(f"{worker!r} is not a worker of this run")

    def _check(self) -> None:
        """Raise if a worker ended on its own (a HALT failure, or it could not start)."""
        for r in list(self._running):
            if not r.task.done():
                continue
            self._running.remove(r)
            error = r.task.exception() if not r.task.cancelled() else None
            if error is not None:
                raise WorkerHalted(f"worker {r.worker.id} crashed: {error!r}") from error
            code = r.task.result()
            names = {self.processors[n].name for n in r.names if n in self.processors}
            halting = [f for f in self._failures.caught if f.processor in names]
            cause = halting[-1] if halting else None
            text = f"worker {r.worker.id} stopped with exit code {code}"
            if cause is not None:
                text += f": {cause.message}: {cause.exception!r}"
            failure = r.worker.failure or (cause.exception if cause else None)
            raise WorkerHalted(text) from failure

    def partitions(self, processor: str) -> dict[str, set[int]]:
        """The partition numbers of ``processor`` each running worker owns now, by worker id."""
        out = {}
        for worker in self.workers:
            for executor in worker.executors:
                if executor.processor.name == processor:
                    out[worker.id] = set(executor.runner.consumers)
        return out

    # Failures.

    @property
    def failures(self) -> list[Failure]:
        """Every exception a processor raised so far, oldest first."""
        return list(self._failures.caught)

    # Waiting.

    async def processed(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 (the API)
        """Wait until every event in the streams of the running processors is processed
        and acknowledged by each of them (quarantined partitions excepted).

        Raises :class:`WorkerHalted` if a worker stopped on its own meanwhile (with the
        processor's exception as the cause), :class:`NotDone` if time runs out.
        """
        await self._until(self._all_processed, timeout, "every event acknowledged")

    async def join(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 (the API)
        """:meth:`processed`, and wait until no job is queued, running, or due by the
        app's clock (jobs due later, by a countdown or a retry's backoff, are left: move
        a ``ManualClock`` forward and join again)."""
        await self._until(self._all_done, timeout, "every event acknowledged and every job done")

    async def _until(self, check: Any, limit: float | None, what: str) -> None:
        seconds = self.wait if limit is None else limit
        last: str = ""
        try:
            async with asyncio.timeout(seconds):
                while True:
                    self._check()
                    last = await check()
                    if not last:
                        self._check()
                        return
                    await asyncio.sleep(0.005)
        except TimeoutError:
            raise NotDone(f"not done within {seconds}s ({what}): {last}") from None

    async def _all_processed(self) -> str:
        """Empty if everything is acknowledged, else what is still outstanding."""
        store = self.app.store
        admin = admin_of(store)
        running = {n for r in self._running if not r.task.done() for n in r.names}
        for name in sorted(running):
            processor = self.processors[name]
            stream = processor.stream
            ids = [p.id for p in stream.partitions]
            backlog = await admin.backlog(ids, processor.name)
            waiting = {k: v for k, v in backlog.items() if v != (0, 0)}
            if not waiting:
                continue
            coordination = store.coordination(self.app.name, stream.name, processor.name)
            quarantined = await coordination.quarantined()
            left = {k: v for k, v in waiting.items() if k not in quarantined}
            if left:
                pid, (undelivered, pending) = next(iter(left.items()))
                more = f" (and {len(left) - 1} more partitions)" if len(left) > 1 else ""
                return (
                    f"processor {name!r}: {undelivered} not delivered and {pending} not "
                    f"acknowledged on partition {pid.number} of {pid.stream}{more}"
                )
        # Records sent with events.send() may still wait in an outbox (a Redis Cluster
        # relays them just after the commit): deliver them now, then look again.
        for name in sorted(running):
            processor = self.processors[name]
            ids = [p.id for p in processor.stream.partitions]
            coordination = store.coordination(self.app.name, processor.stream.name, processor.name)
            relayed = await coordination.relay(ids)
            if relayed:
                return f"processor {name!r}: {relayed} sent records being relayed"
        return ""

    async def _all_done(self) -> str:
        outstanding = await self._all_processed()
        if outstanding or not self.app.jobs:
            return outstanding
        counts = await self.app.job_store.counts(self.app.clock.now())
        due = counts.next_due is not None and counts.next_due <= self.app.clock.now()
        if counts.queued or counts.executing or due:
            return (
                f"jobs: {counts.queued} queued, {counts.executing} running, "
                f"{counts.scheduled} scheduled"
            )
        return ""

    # Looking.

    async def events(self, stream: Stream | str) -> list[Record]:
        """Every event stored in the stream, partition by partition, oldest first."""
        return [record for _, record in await self._entries(_stream(self.app, stream))]

    async def acknowledged(self, processor: str | Processor) -> list[Record]:
        """The events the processor has acknowledged, partition by partition, oldest first
        (an event is acknowledged once its processing finished: returned, or failed and
        ignored)."""
        found = self._processor(processor)
        name, stream = found.name, found.stream
        store = self.app.store
        admin = admin_of(store)
        ids = [p.id for p in stream.partitions]
        delivered = await store.log.last_delivered(ids, name)
        out: list[Record] = []
        for pid in ids:
            last = delivered.get(pid)
            if last is None:
                continue
            first_pending = await admin.first_pending(pid, name)
            for xid, record in await self._entries(stream, [pid]):
                if _id(xid) > _id(last) or (
                    first_pending is not None and _id(xid) >= _id(first_pending)
                ):
                    break
                out.append(record)
        return out

    async def _entries(
        self, stream: Stream, ids: Sequence[PartitionId] | None = None
    ) -> list[tuple[bytes, Record]]:
        store = self.app.store
        admin = admin_of(store)
        out = []
        for pid in ids if ids is not None else [p.id for p in stream.partitions]:
            after: bytes | None = None
            while True:
                page = await admin.scan(pid, after, 500)
                out += [(xid, stream.decode(fields)) for xid, fields in page]
                if len(page) < 500:
                    break
                after = page[-1][0]
        return out

    @property
    def job_store(self) -> JobStore:
        """The app's job queue (for this event loop)."""
        return self.app.job_store

    async def job_counts(self) -> QueueCounts:
        return await self.app.job_store.counts(self.app.clock.now())

    async def dead_letters(self) -> list[DeadLetter]:
        """The job queue's dead letters, oldest first."""
        return await self.app.job_store.dead_letters()


async def _cancel_hard(worker: Worker, task: asyncio.Task[int]) -> None:
    """Cancel a worker at once (twice: as a second signal does) and wait for it to end."""
    task.cancel()
    task.cancel()
    while not task.done():
        await asyncio.wait([task], timeout=1.0)
        if not task.done():
            # A fetcher lane can lose its cancellation inside a Redis read and then wait
            # for a wake-up that never comes (an open issue of the fetcher): tell the
            # fetchers to stop, which wakes them, and cancel again.
            for executor in worker.executors:
                executor.runner.fetcher.stop()
            task.cancel()
    with contextlib.suppress(BaseException):
        task.result()


def _stream(app: App, stream: Stream | str) -> Stream:
    return app.streams[stream] if isinstance(stream, str) else stream


def _id(xid: bytes | str) -> tuple[int, int]:
    text = xid.decode() if isinstance(xid, bytes) else xid
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


@contextlib.asynccontextmanager
async def _pointed(app: App, url: str, settings: Mapping[str, Any]) -> AsyncIterator[None]:
    """The app on another store (and settings) for the block, as it was after."""
    saved = (app.settings, app._connections, app._loopless, app.clock)
    app.settings = app.settings.model_copy(update={"redis_url": url, **settings})
    app._connections = weakref.WeakKeyDictionary()
    app._loopless = None
    _forget_keys(app)
    try:
        yield
    finally:
        await _close_all(app)
        app.settings, app._connections, app._loopless, app.clock = saved
        _forget_keys(app)


def _forget_keys(app: App) -> None:
    """Streams cache their partitions' store keys and prepared schemas: made again on use."""
    for stream in app.streams.values():
        stream._partitions = None
        stream._keys = None
        stream._prepared = set()


async def _close_all(app: App) -> None:
    """Close the run's connections: this loop's, and the portal's (``delay_sync``)."""
    await app.aclose()
    others = [loop for loop in list(app._connections) if not loop.is_closed()]
    for loop in others:
        future = asyncio.run_coroutine_threadsafe(app.aclose(), loop)
        with contextlib.suppress(Exception):
            await asyncio.wrap_future(future)


@contextlib.asynccontextmanager
async def run(
    app: App,
    *,
    store: str = "memory",
    workers: int = 1,
    processors: Sequence[str] | None = None,
    jobs: bool = True,
    clock: Clock | None = None,
    settings: Mapping[str, Any] | None = None,
    fast: bool = True,
    wait: float = WAIT,
) -> AsyncIterator[TestRun]:
    """Run ``app`` in this event loop for the block: ``async with run(app) as t:``.

    ``store``: ``"memory"`` (a fresh in-memory store) or a store URL (``redis://...``;
    the test should empty it first). ``workers``: how many workers to start (0: start
    them with :meth:`TestRun.start_worker`); ``processors``/``jobs``: what they run.
    ``clock``: a clock for the job queue (a ``ManualClock`` to move time by hand).
    ``settings``: app settings to change for the run. ``fast``: shorter blocking reads
    and no join delay for the processors, a shorter schedule interval for jobs (latency
    only: no semantics change). ``wait``: the default limit of every wait.

    On leaving, the workers stop gracefully and the app is back on its own store.
    """
    url = memory_url() if store == "memory" else store
    overrides = {**(FAST_SETTINGS if fast else {}), **(settings or {})}
    timing = dict(FAST_PROCESSORS) if fast else {}
    processors_run = {
        p.id: dataclasses.replace(p, **timing) if timing else p for p in app.processors.values()
    }
    failures = FailureLog(p.name for p in processors_run.values())
    logger = logging.getLogger("runnel.consumer")
    logger.addHandler(failures)
    async with _pointed(app, url, overrides):
        if clock is not None:
            app.clock = clock
        t = TestRun(app, url, processors_run, failures, wait)
        try:
            async with app.connected():
                for _ in range(workers):
                    await t.start_worker(processors, jobs=jobs)
                yield t
                await _stop_all(t)
        finally:
            for r in list(t._running):
                await _cancel_hard(r.worker, r.task)
            logger.removeHandler(failures)
            if store == "memory":
                forget_store(url.removeprefix("memory://"))


async def _stop_all(t: TestRun) -> None:
    for r in list(t._running):
        if not r.task.done():
            r.worker.stop()
    for r in list(t._running):
        with contextlib.suppress(Exception):
            await asyncio.shield(r.task)


class SyncTestRun:
    """:func:`run` for a synchronous test: the app's workers run in an event loop of a
    thread of their own, and each method here waits for its answer there."""

    __test__ = False

    def __init__(self, loop: asyncio.AbstractEventLoop, t: TestRun) -> None:
        self._loop = loop
        self.run = t
        """The :class:`TestRun` (its coroutines must run in the workers' loop: :meth:`call`)."""

    def call(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run ``make()`` in the workers' loop and return its result here."""
        return asyncio.run_coroutine_threadsafe(_made(make), self._loop).result()

    def send(self, stream: Stream | str, *records: Record) -> list[bytes]:
        target = _stream(self.run.app, stream)
        return self.call(lambda: target.send(*records))

    def processed(self, timeout: float | None = None) -> None:
        self.call(lambda: self.run.processed(timeout))

    def join(self, timeout: float | None = None) -> None:
        self.call(lambda: self.run.join(timeout))

    def acknowledged(self, processor: str) -> list[Record]:
        return self.call(lambda: self.run.acknowledged(processor))

    def events(self, stream: Stream | str) -> list[Record]:
        return self.call(lambda: self.run.events(stream))

    @property
    def failures(self) -> list[Failure]:
        return self.run.failures


async def _made(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return await make()


@contextlib.contextmanager
def run_sync(app: App, **options: Any) -> Iterator[SyncTestRun]:
    """``with run_sync(app) as t:``: :func:`run` for tests that are not ``async``; takes
    the same options. Enqueue jobs with ``delay_sync`` and wait with ``result.get()``."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="runnel-test-loop", daemon=True)
    thread.start()
    entered: contextlib.AbstractAsyncContextManager[TestRun] = run(app, **options)
    try:
        t = asyncio.run_coroutine_threadsafe(entered.__aenter__(), loop).result()
        failed: BaseException | None = None
        try:
            yield SyncTestRun(loop, t)
        except BaseException as exc:
            failed = exc
            raise
        finally:
            leave = entered.__aexit__(type(failed) if failed else None, failed, None)
            asyncio.run_coroutine_threadsafe(leave, loop).result()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
