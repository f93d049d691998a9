"""What ``@app.job`` makes of a function: still callable as before, plus ``delay``."""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar, cast, overload

from runnel.exceptions import Misconfigured
from runnel.jobs import codec
from runnel.jobs.limits import JobLimits
from runnel.jobs.model import NewJob
from runnel.jobs.queues import DEFAULT_QUEUE
from runnel.jobs.result import JobResult, SyncJobResult
from runnel.jobs.signature import Signature
from runnel.jobs.workflow import JobSignature
from runnel.metrics import stats
from runnel.plugins.instruments import finish, instruments

if TYPE_CHECKING:
    from runnel.jobs.periodic import Cron
    from runnel.services import Services

P = ParamSpec("P")
R = TypeVar("R")

MAX_ID_LENGTH = 200
MAX_COUNTDOWN = 100 * 365.25 * 86400
"""Longest countdown: a century (a datetime cannot show a due time past the year 9999)."""


class JobFunction(Generic[P, R]):
    """A function that can be enqueued: ``await f.delay(...)`` or ``f.delay_sync(...)``.

    Calling it directly runs it inline, as before decoration.
    """

    def __init__(
        self,
        app: Services,
        func: Callable[..., Any],
        *,
        name: str,
        retries: int,
        timeout: float | None,
        serializer: str,
        queue: str = DEFAULT_QUEUE,
        limits: JobLimits | None = None,
    ) -> None:
        self.app = app
        self.limits = limits
        """Its rate and concurrency limits (runnel.jobs.limits), None if it has none."""
        self.func = func
        self.name = name
        self.retries = retries
        self.timeout = timeout
        self.queue = queue
        self.codec = serializer
        self.serializer = codec.serializer_named(serializer)
        self.signature = Signature(func, name)
        self.is_async = inspect.iscoroutinefunction(func)
        self.periodic: Cron | None = None
        """The schedule of a periodic job (``@app.job(cron=...)``), else None."""
        functools.update_wrapper(cast(Any, self), func)

    def __repr__(self) -> str:
        return f"<Job {self.name}>"

    # A type checker checks the arguments of delay() and delay_sync() against the job's
    # function (ParamSpec), and the result type of its JobResult. A ParamSpec admits no
    # keyword of its own beside it, so a call with countdown, eta or job_id matches one of
    # the overloads below it instead: those options are checked, the arguments are checked
    # at run time (InvalidArguments).

    @overload
    async def delay(self, *args: P.args, **kwargs: P.kwargs) -> JobResult[R]: ...

    @overload
    async def delay(
        self,
        *args: Any,
        countdown: float | None,
        eta: datetime | None = None,
        job_id: str | None = None,
        **kwargs: Any,
    ) -> JobResult[R]: ...

    @overload
    async def delay(
        self, *args: Any, eta: datetime | None, job_id: str | None = None, **kwargs: Any
    ) -> JobResult[R]: ...

    @overload
    async def delay(self, *args: Any, job_id: str | None, **kwargs: Any) -> JobResult[R]: ...

    async def delay(self, *args: Any, **kwargs: Any) -> JobResult[R]:
        """Enqueue a call of this job; return once it is stored.

        ``countdown`` (seconds) or ``eta`` (a datetime; naive means UTC) run it later.
        ``job_id`` names the job: enqueuing an id that exists already enqueues nothing
        and returns the existing job's handle. Arguments are checked against the
        function's signature first (:class:`runnel.jobs.InvalidArguments`).
        """
        countdown, eta, job_id = options(kwargs)
        enqueuing = instruments().enqueuing
        if enqueuing is not None:  # a plugin (tracing) is told, and may add headers
            headers: dict[str, str] = {}
            job_id = job_id or new_job_id()
            done = enqueuing(job=self, job_id=job_id, headers=headers)
            try:
                new = self.prepare(
                    args, kwargs, countdown=countdown, eta=eta, job_id=job_id, headers=headers
                )
                enqueued = await self.app.enqueuer.submit(new)
            except BaseException as exc:
                finish(done, None, exc)
                raise
            finish(done, enqueued, None)
        else:
            new = self.prepare(args, kwargs, countdown=countdown, eta=eta, job_id=job_id)
            enqueued = await self.app.enqueuer.submit(new)
        if enqueued:
            stats.enqueued[self.app.name, self.name, self.queue] += 1
        return JobResult(self.app, new.id, self, enqueued)

    @overload
    def delay_sync(self, *args: P.args, **kwargs: P.kwargs) -> SyncJobResult[R]: ...

    @overload
    def delay_sync(
        self,
        *args: Any,
        countdown: float | None,
        eta: datetime | None = None,
        job_id: str | None = None,
        **kwargs: Any,
    ) -> SyncJobResult[R]: ...

    @overload
    def delay_sync(
        self, *args: Any, eta: datetime | None, job_id: str | None = None, **kwargs: Any
    ) -> SyncJobResult[R]: ...

    @overload
    def delay_sync(self, *args: Any, job_id: str | None, **kwargs: Any) -> SyncJobResult[R]: ...

    def delay_sync(self, *args: Any, **kwargs: Any) -> SyncJobResult[R]:
        """:meth:`delay` for synchronous code (no event loop needed); blocks until stored."""
        countdown, eta, job_id = options(kwargs)
        enqueuing = instruments().enqueuing
        if enqueuing is not None:  # told here, in the caller's thread and trace context
            headers: dict[str, str] = {}
            job_id = job_id or new_job_id()
            done = enqueuing(job=self, job_id=job_id, headers=headers)
            try:
                new = self.prepare(
                    args, kwargs, countdown=countdown, eta=eta, job_id=job_id, headers=headers
                )
                enqueued = self.app.portal.call(lambda: self.app.enqueuer.submit(new))
            except BaseException as exc:
                finish(done, None, exc)
                raise
            finish(done, enqueued, None)
        else:
            new = self.prepare(args, kwargs, countdown=countdown, eta=eta, job_id=job_id)
            enqueued = self.app.portal.call(lambda: self.app.enqueuer.submit(new))
        if enqueued:
            stats.enqueued[self.app.name, self.name, self.queue] += 1
        return JobResult(self.app, new.id, self, enqueued).sync()

    def s(self, *args: Any, **kwargs: Any) -> JobSignature:
        """This call as a workflow step (:mod:`runnel.jobs.workflow`); in a chain it gets
        the previous step's result first. Arguments are checked now."""
        return JobSignature(self, args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> JobSignature:
        """:meth:`s` that gets nothing from the step before it ("immutable")."""
        return JobSignature(self, args, kwargs, immutable=True)

    def result(self, job_id: str) -> JobResult[R]:
        """The handle of a job of this function enqueued earlier (by id)."""
        return JobResult(self.app, job_id, self)

    def prepare(
        self,
        args: tuple[Any, ...] | list[Any],
        kwargs: dict[str, Any],
        *,
        countdown: float | None = None,
        eta: datetime | None = None,
        job_id: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> NewJob:
        """The job to store for this call (checked and encoded; nothing sent).

        ``headers``: what plugins store with the arguments (a trace context)."""
        self.signature.check(args, kwargs)
        now = self.app.clock.now()
        if countdown is not None and eta is not None:
            raise ValueError("give countdown or eta, not both")
        due = None
        if countdown is not None:
            if not 0 <= countdown <= MAX_COUNTDOWN:  # NaN fails this too
                raise ValueError(
                    f"countdown must be a number of seconds from 0 to {MAX_COUNTDOWN:.0f} "
                    f"(100 years), not {countdown!r}"
                )
            if countdown > 0:
                due = now + float(countdown)
        elif eta is not None:
            when = eta.timestamp() if eta.tzinfo else eta.replace(tzinfo=UTC).timestamp()
            if when > now:
                due = when
        if job_id is None:
            job_id = new_job_id()
        elif not isinstance(job_id, str) or not job_id or len(job_id) > MAX_ID_LENGTH:
            raise ValueError(f"job_id must be a string of 1 to {MAX_ID_LENGTH} characters")
        return NewJob(
            id=job_id,
            name=self.name,
            payload=codec.encode_arguments(
                self.serializer, self.name, tuple(args), kwargs, headers
            ),
            codec=self.codec,
            retries=self.retries,
            results=self.app.settings.results_enabled,
            created=now,
            due=due,
            queue=self.queue,
        )


def options(kwargs: dict[str, Any]) -> tuple[float | None, datetime | None, str | None]:
    """Take delay()'s own keywords (countdown, eta, job_id) out of its keyword arguments:
    the rest are the job's."""
    return kwargs.pop("countdown", None), kwargs.pop("eta", None), kwargs.pop("job_id", None)


def new_job_id() -> str:
    """A random job id: as random as ``uuid4().hex``, at half the cost."""
    return os.urandom(16).hex()


class AsyncJob(JobFunction[P, R]):
    """A job whose function is ``async def``: awaited in the worker's event loop."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        return self.func(*args, **kwargs)


class SyncJob(JobFunction[P, R]):
    """A job whose function is a plain ``def``: run in a worker thread, never in the loop."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)


class JobDecorator(Protocol):
    """What ``@app.job(...)`` with options returns: the job of an ``async def`` or of a
    plain ``def``, typed from the function."""

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[P, Coroutine[Any, Any, R]], /
    ) -> AsyncJob[P, R]: ...

    @overload
    def __call__(self, func: Callable[P, R], /) -> SyncJob[P, R]: ...


def make_job(
    app: Services,
    func: Callable[..., Any],
    *,
    name: str | None,
    retries: int,
    timeout: float | None,
    serializer: str,
    queue: str = DEFAULT_QUEUE,
    limits: JobLimits | None = None,
) -> JobFunction[Any, Any]:
    if not callable(func):
        raise Misconfigured(f"@app.job needs a function, not {func!r}")
    job_name = name or func.__name__
    kind = AsyncJob if inspect.iscoroutinefunction(func) else SyncJob
    return kind(
        app,
        func,
        name=job_name,
        retries=retries,
        timeout=timeout,
        serializer=serializer,
        queue=queue,
        limits=limits,
    )
