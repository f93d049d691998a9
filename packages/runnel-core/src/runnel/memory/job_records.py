"""The records the in-memory job queue keeps (the Redis store's hashes, letters and
results), and the small helpers its store uses (:mod:`runnel.memory.jobs`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from runnel.jobs import codec
from runnel.jobs.model import ErrorInfo, JobRecord, JobStatus, Progress, QueueCounts
from runnel.jobs.queues import DEFAULT_QUEUE


def ms(seconds: float) -> int:
    return int(seconds * 1000)


def seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


@dataclass(slots=True)
class StoredJob:
    """A job's record (the Redis store's job hash), times in milliseconds."""

    name: str
    payload: bytes
    codec: str
    retries: int
    results: bool
    created: int
    status: JobStatus = JobStatus.SENT
    tries: int = 0
    due: int | None = None
    started: int | None = None
    finished: int | None = None
    executor: str | None = None
    error: ErrorInfo | None = None
    replayed: int | None = None
    queue: str = DEFAULT_QUEUE
    expires: float | None = None
    """Monotonic time the record is gone at (a success's, after ``results_ttl``)."""
    entry: bytes | None = None
    """Its latest entry in its queue (the Redis store's ``entry`` field), to cancel it by."""
    progress: Progress | None = None
    waiting: str | None = None
    """Why its last start was put off (``"rate"``, ``"concurrency"``), until admitted."""
    workflow: str | None = None
    """The workflow it belongs to, if any (:mod:`runnel.memory.job_workflows`)."""
    then: tuple[str, ...] = ()
    """The jobs of its workflow waiting for it."""
    call: bytes | None = None
    """The enqueue call that stored it (its identity's key), to know that call's retry."""

    def shown(self, job_id: str, result: bytes | None) -> JobRecord:
        """The record as the store interface returns it (times in seconds)."""
        return JobRecord(
            id=job_id,
            name=self.name,
            status=self.status,
            payload=self.payload,
            codec=self.codec,
            tries=self.tries,
            retries=self.retries,
            results=self.results,
            created=self.created / 1000,
            due=seconds(self.due),
            started=seconds(self.started),
            finished=seconds(self.finished),
            executor=self.executor,
            error=stored_error(self.error),
            result=result,
            progress=self.progress,
            queue=self.queue,
            waiting=self.waiting,
            workflow=self.workflow,
        )


@dataclass(slots=True)
class StoredResult:
    item: bytes
    expires: float | None = None


@dataclass(slots=True)
class Letter:
    id: str
    name: str
    error: str
    at: int
    queue: str = DEFAULT_QUEUE


@dataclass(slots=True)
class Waiter:
    """A coroutine blocked in some event loop until the state changes."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]

    def wake(self) -> None:
        try:
            self.loop.call_soon_threadsafe(settle, self.future)
        except RuntimeError:  # its loop is closed: nobody waits any more
            pass


def settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass(slots=True)
class Tally:
    """One queue's counts, as they are gathered."""

    queued: int = 0
    executing: int = 0
    scheduled: int = 0
    dead: int = 0
    due: int | None = None

    def schedule(self, due: int) -> None:
        self.scheduled += 1
        self.due = due if self.due is None else min(self.due, due)

    def counts(self) -> QueueCounts:
        next_due = None if self.due is None else self.due / 1000
        return QueueCounts(self.queued, self.executing, self.scheduled, self.dead, 0, next_due)


def letter_line(error: ErrorInfo | None) -> str:
    """What a dead letter says of the error: its type, and its message if any."""
    if error is None:
        return "Error"
    return f"{error.type}: {error.message}" if error.message else error.type


def stored_error(error: ErrorInfo | None) -> ErrorInfo | None:
    """The error as a reader of the Redis store gets it back (through its JSON form)."""
    return None if error is None else codec.error_from_json(codec.error_json(error))
