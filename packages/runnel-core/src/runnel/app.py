"""``App``: where streams, processors, jobs and background tasks are declared."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from datetime import tzinfo
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar, overload

from pydantic import ValidationError

from runnel.background import BackgroundTask, validate_crontab
from runnel.codecs.resolve import resolve_serializer
from runnel.exceptions import Misconfigured
from runnel.hashing import resolve_hasher
from runnel.interfaces import Middleware, Serializer
from runnel.jobs.clock import Clock, SystemClock
from runnel.jobs.queues import DEFAULT_QUEUE, QueueSelection, check_queue_name, declared_queues
from runnel.plugins.manager import load_plugin
from runnel.processor import Processor, Processors, option_settings
from runnel.record import Record
from runnel.settings import Settings, zone_of
from runnel.store.backend import Backend
from runnel.store.identity import Producer
from runnel.store.resolve import backend_for
from runnel.stream import R as RecordT
from runnel.stream import Stream, stream_serializer
from runnel.stream import idempotence_window as window_of
from runnel.tables import Table, TableBase
from runnel.text import did_you_mean
from runnel.types import ExceptionPolicy

if TYPE_CHECKING:
    # The job queue's modules are imported where a job is declared or used: an app of
    # streams only never needs them, and they take a good part of a worker's start.
    from runnel.jobs.batching import EnqueueBatches
    from runnel.jobs.function import AsyncJob, JobDecorator, JobFunction, SyncJob
    from runnel.jobs.periodic import Cron
    from runnel.jobs.portal import Portal
    from runnel.jobs.result import JobResult
    from runnel.jobs.workflow import JobSignature, WorkflowResult
    from runnel.processing.events import Events
    from runnel.store.jobs import JobStore

log = logging.getLogger("runnel.app")

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class _Connections:
    """What an app uses in one event loop: its store, and its job store and enqueue
    batches (made on first use, over the store's connections)."""

    store: Backend
    job_store: JobStore | None = None
    enqueuer: EnqueueBatches | None = None
    holders: int = 0  # workers running on these connections (see App.connected)


def _one_line(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())


def _schedule(job: str, cron: Any, timezone: Any, missed: Any) -> Cron | None:
    """A periodic job's schedule from ``@app.job``'s options, checked (Misconfigured)."""
    if cron is None:
        if timezone is not None or missed is not None:
            raise Misconfigured(f"job {job!r}: timezone= and missed= need cron=")
        return None
    from runnel.jobs.periodic import Cron

    try:
        return Cron.declare(cron, timezone, missed)
    except ValueError as exc:
        raise Misconfigured(f"job {job!r}: {exc}") from None


def _check_name(what: str, name: Any) -> None:
    """Names are any non-empty text, as in runnel 0.1 (``myproj.orders`` included): they
    only ever go into keys, which are never parsed back into names."""
    if not isinstance(name, str) or not name:
        raise Misconfigured(f"{what} name must be a non-empty string, not {name!r}")


class App:
    """A Runnel application.

    ``App(name="myapp", redis_url="redis://...", **settings)``: any setting can be given as
    a keyword or as a ``RUNNEL_<NAME>`` environment variable (keywords win). ``plugins``
    registers extra plugin modules (or import paths) for this process.
    """

    def __init__(self, name: str, *, plugins: Iterable[Any] = (), **settings: Any) -> None:
        _check_name("app", name)
        self.name = name
        for plugin in plugins:
            load_plugin(plugin, source="App(plugins=...)")
        self.settings = Settings(**settings)
        self.streams: dict[str, Stream] = {}
        self.processors = Processors()
        """By id (``{app}.{stream}.{name}``); a processor's name is a key too if unique."""
        self.jobs: dict[str, JobFunction[Any, Any]] = {}
        """The job queue's functions (``@app.job``), by name."""
        self.tables: dict[str, TableBase] = {}
        """Tables (``app.table``), by name."""
        self.background: list[BackgroundTask] = []
        """Tasks, timers and crontabs (``@app.task``, ``@app.timer``, ``@app.crontab``)."""
        self.clock: Clock = SystemClock()
        """What the job queue takes the time from; tests may put a ``ManualClock`` here."""
        self.producer = Producer()
        """The identity of each send's append call (``idempotent_sends``)."""
        self._connections: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Connections]
        self._connections = weakref.WeakKeyDictionary()
        self._loopless: _Connections | None = None
        self._portal: Portal | None = None

    def __repr__(self) -> str:
        return f"<App {self.name}>"

    # Connections, made on first use in each event loop (they belong to a loop;
    # synchronous job calls run in a loop of their own, see runnel.jobs.portal).

    def _here(self) -> _Connections:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # outside any loop: only for what needs no connection
            if self._loopless is None:
                self._loopless = _Connections(self._new_store())
            return self._loopless
        found = self._connections.get(loop)
        if found is None:
            found = self._connections[loop] = _Connections(self._new_store())
        return found

    def _new_store(self) -> Backend:
        return backend_for(self.settings.redis_url, self.settings)

    @property
    def store(self) -> Backend:
        """The store of this app (its streams, coordination, job queue), for this event
        loop: each of its roles is an object of its own (:mod:`runnel.store`)."""
        return self._here().store

    @property
    def transport(self) -> Backend:
        """runnel 0.2.0.dev's name for :attr:`store`."""
        return self.store

    @property
    def redis(self) -> Any:
        """An asyncio Redis client (``redis.asyncio.Redis``) for the app's URL, for the
        app's own commands, as in runnel 0.1; one per event loop, closed by :meth:`aclose`.
        Redis stores only: another store raises :class:`Misconfigured`."""
        client = self.store.client()
        if client is None:
            raise Misconfigured(
                f"{type(self.store).__name__} has no client for an app's own commands"
            )
        return client

    @property
    def job_store(self) -> JobStore:
        """The store of this app's job queue, for this event loop."""
        here = self._here()
        if here.job_store is None:
            here.job_store = here.store.job_store(self.name)
        return here.job_store

    @property
    def enqueuer(self) -> EnqueueBatches:
        """Enqueues jobs for this event loop, coalescing concurrent ``delay()`` calls."""
        here = self._here()
        if here.enqueuer is None:
            from runnel.jobs.batching import EnqueueBatches

            settings = self.settings
            producer = self.producer if settings.idempotent_sends else None
            here.enqueuer = EnqueueBatches(self.job_store, producer, settings.send_retries)
        return here.enqueuer

    @contextlib.asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        """Hold this event loop's connections open while the block runs; they are closed
        when the last holder leaves. Several workers of one app can so run in one loop
        (in a test, say) without the first to stop closing them under the others."""
        loop = asyncio.get_running_loop()
        here = self._here()
        here.holders += 1
        try:
            yield
        finally:
            here.holders -= 1
            if here.holders == 0 and self._connections.get(loop) is here:
                await self.aclose()

    async def aclose(self) -> None:
        """Close this event loop's connections."""
        here = self._connections.pop(asyncio.get_running_loop(), None)
        if here is not None:
            await here.store.aclose()

    @property
    def portal(self) -> Portal:
        """The event loop synchronous job calls (``delay_sync``, ``.sync()``) run in."""
        if self._portal is None:
            from runnel.jobs.portal import Portal

            self._portal = Portal(self.name)
        return self._portal

    # Declarations.

    def stream(
        self,
        name: str,
        record: type[RecordT],
        partition_by: str | Callable[[Any], Any],
        partition_count: int | None = None,
        partition_size: int | None = None,
        serializer: Serializer | str | None = None,
        hasher: Callable[[Any], int] | str | None = None,
        on_full: Literal["wait", "drop_oldest"] | None = None,
        idempotence_window: float | None = None,
        idempotence_keys: int | None = None,
        idempotency_key: str | None = None,
    ) -> Stream[RecordT]:
        """Declare a stream of ``record`` events, partitioned by ``partition_by``.

        ``on_full``: when a partition is at ``partition_size`` with entries a processor
        has not acknowledged, ``"wait"`` (the default) makes a send wait for room, and
        ``"drop_oldest"`` trims them anyway, counting each as lost (docs/guide.md).
        ``idempotency_key``: the field whose value is a record's key: a record sent twice
        with one key is appended once within the idempotence window (docs/guide.md)."""
        _check_name("stream", name)
        s = self.settings
        if not (isinstance(record, type) and issubclass(record, Record)):
            raise Misconfigured(
                f"stream {name!r}: record must be a Record subclass, not {record!r}"
            )
        stream = Stream(
            app=self,
            name=name,
            record=record,
            partition_by=partition_by,
            partition_count=s.default_partition_count
            if partition_count is None
            else partition_count,
            partition_size=s.default_partition_size if partition_size is None else partition_size,
            serializer=stream_serializer(record, serializer, s.default_serializer),
            hasher=s.default_hasher if hasher is None else resolve_hasher(hasher),
            on_full=s.default_on_full if on_full is None else on_full,
            idempotence=window_of(
                name,
                s.default_idempotence_window if idempotence_window is None else idempotence_window,
                s.default_idempotence_keys if idempotence_keys is None else idempotence_keys,
            ),
            idempotency_key=idempotency_key,
        )
        existing = self.streams.get(name)
        if existing is not None and existing.partition_count != stream.partition_count:
            raise Misconfigured(f"stream {name!r} is already declared with another partition_count")
        self.streams[name] = stream
        return stream

    def table(
        self,
        name: str,
        *,
        source: Stream,
        default: Any = None,
        record: type[Record] | None = None,
        serializer: Serializer | str | None = None,
    ) -> Table:
        """Declare a table: a map kept per partition of ``source``, keyed by its partition
        keys, that the processor of ``source`` reads and writes with ``table[key]`` and
        that commits with the acknowledgement of each event (docs/state.md). Reading a key
        that was never written gives ``default``; ``record`` stores values as that Record
        type; ``serializer`` encodes them (the app's ``default_serializer`` otherwise)."""
        _check_name("table", name)
        if not isinstance(source, Stream):
            raise Misconfigured(f"table {name!r} needs a source Stream, not {source!r}")
        if name in self.tables:
            raise Misconfigured(f"a table named {name!r} is already declared")
        if record is not None and not (isinstance(record, type) and issubclass(record, Record)):
            raise Misconfigured(f"table {name!r}: record must be a Record subclass, not {record!r}")
        chosen = resolve_serializer(
            serializer if serializer is not None else self.settings.default_serializer
        )
        table = Table(self, name, source, default, chosen, record, registry=self.tables)
        self.tables[name] = table
        source.tables.append(table)
        return table

    def processor(
        self,
        stream: Stream[RecordT],
        *,
        exception_policy: ExceptionPolicy | str | None = None,
        middleware: Sequence[Middleware] | None = (),
        name: str | None = None,
        **options: Any,
    ) -> Callable[[Callable[[Events[RecordT]], Awaitable[Any]]], Processor]:
        """Declare ``async def f(events)`` as a processor of ``stream``'s events.

        Returns the :class:`Processor`, which calls ``f`` when called. Options (see
        :class:`ProcessorOptions`) override the app's ``default_*`` settings; a name is
        unique per stream (``name`` defaults to the function's).
        """
        known = option_settings()
        unknown = set(options) - set(known)
        if unknown:
            named = ", ".join(did_you_mean(u, known) for u in sorted(unknown))
            raise Misconfigured(f"unknown processor options: {named}")
        if not isinstance(stream, Stream):
            raise Misconfigured(f"@app.processor needs a Stream, not {stream!r}")
        if exception_policy is not None:
            options["exception_policy"] = exception_policy

        def decorate(func: Callable[[Events], Awaitable[Any]]) -> Processor:
            if isinstance(func, Processor):  # stacked: one function on several streams
                func = func.func
            if not asyncio.iscoroutinefunction(func):
                raise Misconfigured(
                    f"processor {getattr(func, '__qualname__', func)!r} must be an async function"
                )
            proc_name = name if name is not None else func.__name__
            _check_name("processor", proc_name)
            proc_id = f"{stream.id}.{proc_name}"
            if self.processors.by_id(proc_id) is not None:
                raise Misconfigured(
                    f"a processor named {proc_name!r} is already declared on stream "
                    f"{stream.name!r} (names are unique per stream; pass name=...)"
                )
            try:
                checked = self.settings.processor_options(**options)
            except ValidationError as exc:
                raise Misconfigured(f"processor {proc_name!r}: {_one_line(exc)}") from None
            proc = Processor(
                app=self,
                stream=stream,
                func=func,
                name=proc_name,
                middleware=list(middleware or ()),
                **vars(checked),
            )
            for m in proc.middleware:
                check = getattr(m, "check_processor", None)
                if check is not None:
                    check(proc)
            self.processors.add(proc)
            stream.readers.append(proc_name)
            func.__runnel_processor__ = proc  # type: ignore[attr-defined]
            return proc

        return decorate

    @overload
    def job(  # type: ignore[overload-overlap]
        self, func: Callable[P, Coroutine[Any, Any, R]], /
    ) -> AsyncJob[P, R]: ...

    @overload
    def job(self, func: Callable[P, R], /) -> SyncJob[P, R]: ...

    @overload
    def job(
        self,
        func: None = None,
        /,
        *,
        retries: int | None = None,
        timeout: float | None = None,
        name: str | None = None,
        serializer: str = "json",
        cron: str | None = None,
        timezone: str | tzinfo | None = None,
        missed: str | None = None,
        queue: str = DEFAULT_QUEUE,
        rate_limit: str | None = None,
        concurrency_limit: int | None = None,
    ) -> JobDecorator: ...

    def job(
        self,
        func: Callable[..., Any] | None = None,
        /,
        *,
        retries: int | None = None,
        timeout: float | None = None,
        name: str | None = None,
        serializer: str = "json",
        cron: str | None = None,
        timezone: str | tzinfo | None = None,
        missed: str | None = None,
        queue: str = DEFAULT_QUEUE,
        rate_limit: str | None = None,
        concurrency_limit: int | None = None,
    ) -> Any:
        """Declare a job: a function workers run when it is enqueued (``f.delay(...)``).

        ``async def`` functions are awaited in the worker's loop, plain ones run in a
        thread. A failure is retried ``retries`` times (``default_retries``) with
        exponential backoff, then the job is DEAD. ``timeout`` (seconds) fails a try that
        runs longer. ``serializer`` names how arguments and results are encoded.
        ``cron`` also enqueues it, without arguments, once per tick of that schedule in
        ``timezone`` (a zone name; None: UTC); ``missed`` says what becomes of ticks no
        worker was up for: ``"run_once"`` (the default) or ``"skip"`` (docs/jobs.md).
        ``queue`` names the queue its jobs go to (docs/jobs.md, "Queues and priorities").
        ``rate_limit`` (``"100/s"``, ``"5/m"``, ``"10/30s"``) and ``concurrency_limit``
        bound its starts and its running jobs across all workers (docs/jobs.md).
        """
        if retries is not None and (not isinstance(retries, int) or retries < 0):
            raise Misconfigured(f"job retries must be an integer >= 0, not {retries!r}")
        if timeout is not None and not timeout > 0:
            raise Misconfigured(f"job timeout must be > 0 seconds, not {timeout!r}")
        try:
            check_queue_name(queue)
        except ValueError as exc:
            raise Misconfigured(f"job queue: {exc}") from None

        def decorate(f: Callable[..., Any]) -> JobFunction[Any, Any]:
            from runnel.jobs.function import make_job
            from runnel.jobs.limits import parse_limits
            from runnel.jobs.model import InvalidArguments

            job_name = name or getattr(f, "__name__", "")
            if not job_name or any(c in job_name for c in " :{}"):
                raise Misconfigured(
                    f"job name {job_name!r} must be non-empty without spaces, ':' or braces"
                )
            if job_name in self.jobs:
                raise Misconfigured(f"a job named {job_name!r} is already declared")
            schedule = _schedule(job_name, cron, timezone, missed)
            try:
                limits = parse_limits(rate_limit, concurrency_limit)
            except Misconfigured as exc:
                raise Misconfigured(f"job {job_name!r}: {exc}") from None
            try:
                job = make_job(
                    self,
                    f,
                    name=job_name,
                    retries=self.settings.default_retries if retries is None else retries,
                    timeout=timeout,
                    serializer=serializer,
                    queue=queue,
                    limits=limits,
                )
            except (TypeError, ValueError) as exc:  # a signature or serializer that cannot work
                raise Misconfigured(f"job {job_name!r}: {exc}") from None
            if schedule is not None:
                try:
                    job.signature.check((), {})
                except InvalidArguments:
                    raise Misconfigured(
                        f"job {job_name!r}: a periodic job is called without arguments, so "
                        "each parameter needs a default"
                    ) from None
                job.periodic = schedule
            self.jobs[job_name] = job
            return job

        return decorate(func) if func is not None else decorate

    @property
    def job_queues(self) -> list[str]:
        """The queues the app's jobs go to, in the order first declared; the default
        queue, which always exists, last if no job names it."""
        return declared_queues(self.jobs.values())

    def job_result(self, job_id: str) -> JobResult[Any]:
        """The handle of any job of this app, by id (its result is not typed)."""
        from runnel.jobs.result import JobResult

        return JobResult(self, job_id)

    def signature(self, name: str, *args: Any, **kwargs: Any) -> JobSignature:
        """A workflow step by the job's declared name: ``app.signature("resize", 7)`` is
        ``resize.s(7)``. Raises :class:`runnel.jobs.InvalidWorkflow` for an undeclared job."""
        from runnel.jobs.workflow_model import InvalidWorkflow

        job = self.jobs.get(name)
        if job is None:
            known = ", ".join(sorted(self.jobs)) or "none"
            raise InvalidWorkflow(f"no job named {name!r} in app {self.name!r} (known: {known})")
        return job.s(*args, **kwargs)

    def workflow_result(self, workflow_id: str) -> WorkflowResult:
        """The handle of a workflow of this app, by id (``chain(...).delay()`` gave it)."""
        from runnel.jobs.workflow import WorkflowResult

        return WorkflowResult(self, workflow_id)

    @overload
    def task(self, func: F, *, on_leader: bool = False) -> F: ...

    @overload
    def task(self, func: None = None, *, on_leader: bool = False) -> Callable[[F], F]: ...

    def task(self, func: F | None = None, *, on_leader: bool = False) -> Any:
        """Run ``func`` once when a worker starts (only on the leader if ``on_leader``)."""

        def decorate(f: F) -> F:
            self.background.append(BackgroundTask(func=f, kind="task", on_leader=on_leader))
            return f

        return decorate(func) if func is not None else decorate

    def timer(self, *, interval: float, on_leader: bool = False) -> Callable[[F], F]:
        """Run the function every ``interval`` seconds while a worker runs."""
        if interval <= 0:
            raise Misconfigured("timer interval must be > 0 seconds")

        def decorate(f: F) -> F:
            self.background.append(
                BackgroundTask(func=f, kind="timer", on_leader=on_leader, interval=interval)
            )
            return f

        return decorate

    def crontab(
        self, spec: str, *, on_leader: bool = False, timezone: str | tzinfo | None = None
    ) -> Callable[[F], F]:
        """Run the function on a cron schedule (``"45 17 * * *"``) in ``timezone`` (a name,
        a ``ZoneInfo`` or a pytz zone; default: the ``timezone`` setting)."""
        try:
            validate_crontab(spec)
        except ValueError as exc:
            raise Misconfigured(str(exc)) from None
        try:
            tz = zone_of(self.settings.timezone if timezone is None else timezone)
        except ValueError as exc:
            raise Misconfigured(str(exc)) from None

        def decorate(f: F) -> F:
            self.background.append(
                BackgroundTask(func=f, kind="crontab", on_leader=on_leader, spec=spec, timezone=tz)
            )
            return f

        return decorate

    # Running.

    def autodiscover(self) -> list[str]:
        """Import the modules matching the ``autodiscover`` glob (so their decorators run)."""
        from runnel.discovery import autodiscover

        return autodiscover(self.settings.autodiscover) if self.settings.autodiscover else []

    async def run_worker(
        self,
        processors: Sequence[str] | None = None,
        *,
        jobs: bool = True,
        concurrency: int | None = None,
        queues: str | QueueSelection | None = None,
        halt_raises: bool = False,
    ) -> int:
        """Run a worker in this process until stopped; return its exit code.

        ``processors`` picks some processors (by name or id; default: all; ``[]``: none);
        ``jobs=False`` leaves the job queue to other workers; ``concurrency`` overrides
        ``job_concurrency``; ``queues`` (``"critical,default"``, ``"critical=5,default=1"``)
        overrides ``job_queues``. With ``halt_raises``, a processor's exception that halted the
        worker (``ExceptionPolicy.HALT``) is raised once the worker has stopped, as runnel
        0.1's ``Worker(app).start()`` let it propagate; otherwise the exit code is 1.
        """
        from runnel.runtime.worker import Worker

        self.autodiscover()
        chosen = None
        if processors is not None:
            missing = [p for p in processors if p not in self.processors]
            if missing:
                names = ", ".join(dict.fromkeys(p.name for p in self.processors.values()))
                raise Misconfigured(
                    f"unknown processor(s): {', '.join(missing)} "
                    f"(app {self.name} has: {names or 'none'})"
                )
            # A name picks every processor so named (one per stream), as in 0.1.
            chosen = list({id(p): p for n in processors for p in self.processors.named(n)}.values())
        worker = Worker(self, chosen, jobs=jobs, concurrency=concurrency, queues=queues)
        code = await worker.run()
        if halt_raises and worker.failure is not None:
            raise worker.failure
        return code
