"""``JobResult``: a handle on an enqueued job, to follow its status and wait for its result."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from runnel.jobs import codec
from runnel.jobs.model import (
    JobFailed,
    JobNotFound,
    JobRecord,
    JobStatus,
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

    ``await result.status()`` and ``await result.get(timeout=...)``; :meth:`sync` gives the
    same handle for synchronous code.
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

    async def get(self, timeout: float | None = None) -> R:  # noqa: ASYNC109 (the API)
        """The job's return value, waiting up to ``timeout`` seconds (None: no limit).

        Raises :class:`JobFailed` if the job ended DEAD (the last exception's type and
        message), :class:`Timeout`, :class:`ResultsDisabled` if it keeps no result (a
        job that ended DEAD still raises JobFailed), or :class:`JobNotFound`.
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
