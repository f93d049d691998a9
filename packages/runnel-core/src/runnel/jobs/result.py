"""``JobResult``: a handle on an enqueued job, to follow its status and wait for its result."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from runnel.jobs import codec
from runnel.jobs.model import (
    ENDED,
    JobCancelled,
    JobFailed,
    JobNotFound,
    JobRecord,
    JobStatus,
    Progress,
    ResultsDisabled,
    Timeout,
)

if TYPE_CHECKING:
    from runnel.jobs.signature import Signature
    from runnel.services import Services

R = TypeVar("R")

WAIT_SLICE = 1.0
"""Longest single blocking wait for a result: between two, the job is looked at again (it
may have been purged), and a cancellation is never held back longer than this."""


class JobOf(Protocol):
    """What a handle needs of the declared job it came from (:class:`JobFunction`)."""

    @property
    def name(self) -> str: ...

    @property
    def signature(self) -> Signature: ...


class JobResult(Generic[R]):
    """An enqueued job, seen from the code that enqueued it (or knows its id).

    ``await result.status()``, ``await result.get(timeout=...)``, ``await result.progress()``
    and ``await result.cancel()``; :meth:`sync` gives the same handle for synchronous code.
    """

    def __init__(
        self,
        app: Services,
        job_id: str,
        job: JobOf | None = None,
        enqueued: bool | None = None,
    ) -> None:
        self.app = app
        self.id = job_id
        self.job = job
        self.enqueued = enqueued
        """From ``delay()``: True if this call stored the job, False if a job with its
        ``job_id`` existed already (and was left as it was); None for a handle by id."""

    def __repr__(self) -> str:
        name = f" {self.job.name}" if self.job is not None else ""
        return f"<JobResult{name} {self.id}>"

    async def status(self) -> JobStatus:
        return await self.app.job_store.status(self.id)

    async def info(self) -> JobRecord | None:
        """Everything the store keeps of the job (None if there is no such job)."""
        return await self.app.job_store.job(self.id)

    async def progress(self) -> Progress | None:
        """What the job last reported of its progress (``report_progress``) in its current
        or last try; None before it reports any (or if there is no such job)."""
        record = await self.app.job_store.job(self.id)
        return None if record is None else current_progress(record)

    async def cancel(self) -> bool:
        """Cancel the job unless it has ended: True if this call cancelled it.

        A queued or scheduled job never runs; a running one is stopped where it runs (an
        ``async def`` job gets ``CancelledError``, a plain ``def`` job sees
        ``current_job().cancelled``). Its status becomes CANCELLED at once, no retry
        follows, and ``get()`` raises :class:`JobCancelled`. A job that has ended
        (SUCCESS, DEAD or CANCELLED) is left as it is: False. Raises :class:`JobNotFound`
        if there is no such job.
        """
        settings = self.app.settings
        before = await self.app.job_store.cancel(
            self.id, self.app.clock.now(), settings.results_ttl
        )
        if before is JobStatus.UNKNOWN:
            raise JobNotFound(f"no job with id {self.id!r}")
        return before not in ENDED

    async def get(self, timeout: float | None = None) -> R:  # noqa: ASYNC109 (the API)
        """The job's return value, waiting up to ``timeout`` seconds (None: no limit).

        Raises :class:`JobFailed` if the job ended DEAD (the last exception's type and
        message), :class:`JobCancelled`, :class:`Timeout`, :class:`ResultsDisabled` if it
        keeps no result (a job that ended DEAD or CANCELLED still says so), or
        :class:`JobNotFound`.
        """
        store = self.app.job_store
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + max(0.0, timeout)
        record = await store.job(self.id)
        if record is None:
            raise JobNotFound(f"no job with id {self.id!r}")
        if record.result is not None:
            return self._read(record.result, record.codec)
        if record.status is JobStatus.DEAD and record.error is not None:
            raise JobFailed(self.id, record.error.type, record.error.message)
        if record.status is JobStatus.CANCELLED:
            raise JobCancelled(self.id)
        if not record.results:
            raise ResultsDisabled(f"job {self.id!r} was enqueued with results_enabled=False")
        while True:
            left = WAIT_SLICE if deadline is None else min(WAIT_SLICE, deadline - loop.time())
            if left <= 0:
                raise Timeout(f"job {self.id!r} did not finish within {timeout}s")
            item = await store.wait_result(self.id, left)
            if item is not None:
                return self._read(item, record.codec)
            if await store.status(self.id) is JobStatus.UNKNOWN:
                raise JobNotFound(f"job {self.id!r} is gone (purged or expired)")

    def _read(self, item: bytes, codec_name: str) -> R:
        if item == codec.CANCELLED:
            raise JobCancelled(self.id)
        ok, value = codec.read_item(codec.serializer_named(codec_name), item)
        if not ok:
            raise JobFailed(self.id, value.type, value.message)
        if self.job is not None:
            return self.job.signature.read_result(value)
        return value

    def sync(self) -> SyncJobResult[R]:
        """The same handle with blocking methods, for code without an event loop."""
        return SyncJobResult(self)


class SyncJobResult(Generic[R]):
    """:class:`JobResult` for synchronous code: the same methods, blocking."""

    def __init__(self, result: JobResult[R]) -> None:
        self._result = result
        self.id = result.id
        self.enqueued = result.enqueued

    def __repr__(self) -> str:
        return repr(self._result).replace("<JobResult", "<SyncJobResult", 1)

    def status(self) -> JobStatus:
        return self._result.app.portal.call(self._result.status)

    def info(self) -> JobRecord | None:
        return self._result.app.portal.call(self._result.info)

    def get(self, timeout: float | None = None) -> R:
        return self._result.app.portal.call(lambda: self._result.get(timeout))

    def progress(self) -> Progress | None:
        return self._result.app.portal.call(self._result.progress)

    def cancel(self) -> bool:
        return self._result.app.portal.call(self._result.cancel)


def current_progress(record: JobRecord) -> Progress | None:
    """The job's progress if its latest try reported it (an earlier try's is stale)."""
    progress = record.progress
    return progress if progress is not None and progress.tries == record.tries else None
