"""What the job queue is made of: statuses, errors, and the values that cross the store seam.

A job's life (the fennel design)::

    UNKNOWN --enqueue--> SENT --a worker starts it--> EXECUTING --returns--> SUCCESS
                                                        |    ^
                                          raises, tries |    | due again
                                                   left v    |
                                                        RETRY
                                    raises, no tries left: DEAD (in the dead letters)

    SENT, RETRY or EXECUTING --cancel()--> CANCELLED

    A workflow's job that waits for others (runnel.jobs.workflow_model):
    WAITING --its predecessors succeeded--> SENT;  WAITING --the workflow failed--> CANCELLED
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Literal

from runnel.exceptions import RunnelError
from runnel.jobs.queues import DEFAULT_QUEUE


@enum.unique
class JobStatus(enum.StrEnum):
    UNKNOWN = "UNKNOWN"
    """No such job: never enqueued, or finished and expired (``results_ttl``)."""
    WAITING = "WAITING"
    """A workflow's job waiting for its predecessors to succeed: in no queue yet."""
    SENT = "SENT"
    """Enqueued (now or for later), not started yet."""
    EXECUTING = "EXECUTING"
    """A worker is running it."""
    RETRY = "RETRY"
    """A try failed (or its worker died); it runs again when its backoff is over."""
    SUCCESS = "SUCCESS"
    """It returned; its result is kept for ``results_ttl``."""
    DEAD = "DEAD"
    """Every try failed; it waits in the dead letters to be replayed or purged."""
    CANCELLED = "CANCELLED"
    """Cancelled before it ended; it never runs again. Kept for ``results_ttl``."""


ENDED = frozenset({JobStatus.SUCCESS, JobStatus.DEAD, JobStatus.CANCELLED})
"""Statuses a job keeps until it expires or is replayed: cancelling it changes nothing."""


# Errors a caller of the job API can meet.


class JobError(RunnelError):
    """Base class of the job queue's errors."""


class JobFailed(JobError):
    """The job ended DEAD: every try raised. Carries the last exception's type and message."""

    def __init__(self, job_id: str, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}" if message else type_name)
        self.job_id = job_id
        self.type = type_name
        self.message = message


class JobCancelled(JobError):
    """The job was cancelled (``result.cancel()``, ``runnel jobs cancel``): no result."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id!r} was cancelled")
        self.job_id = job_id


class Timeout(JobError, TimeoutError):
    """``get(timeout=...)`` ran out of time before the job ended."""


class ResultsDisabled(JobError):
    """The job was enqueued with ``results_enabled=False``: there is no result to wait for."""


class JobNotFound(JobError):
    """No job has this id (never enqueued, or its result expired)."""


class InvalidArguments(JobError, TypeError):
    """The arguments do not fit the job function's signature or annotations."""


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """An exception as the store keeps it: enough to re-raise its kind and show where."""

    type: str
    message: str
    traceback: str = ""

    def one_line(self) -> str:
        text = f"{self.type}: {self.message}" if self.message else self.type
        return " ".join(text.split())


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a running job says it got (``report_progress``), and when."""

    fraction: float
    """From 0.0 (nothing done) to 1.0 (all done)."""
    message: str
    """A short line of the job's own (at most 200 characters), or ''."""
    at: float
    tries: int
    """The try that reported it (``JobContext.tries``)."""


# Values that cross the store interface. Times are seconds since the epoch (floats), from
# the clock of whoever writes them; the store keeps milliseconds.


@dataclass(slots=True)
class NewJob:
    """A job to enqueue."""

    id: str
    name: str
    payload: bytes
    """The arguments, encoded by ``codec``."""
    codec: str
    retries: int
    results: bool
    """Whether the worker keeps the result (the enqueuing app's ``results_enabled``)."""
    created: float
    due: float | None = None
    """When to run it; ``None`` means now (straight onto the queue, not the schedule)."""
    queue: str = DEFAULT_QUEUE
    """The queue it goes to (its declaration's ``queue=``)."""


@dataclass(slots=True)
class Delivery:
    """A job a worker has taken: its status is EXECUTING and this try is counted."""

    ticket: bytes
    """The store's handle for this delivery; an outcome names it to be applied."""
    id: str
    name: str
    payload: bytes
    codec: str
    tries: int
    """Tries started so far, this one included."""
    retries: int
    results: bool
    queue: str = DEFAULT_QUEUE
    """The queue it was taken from."""


OutcomeKind = Literal["success", "retry", "dead", "release"]


@dataclass(slots=True)
class Outcome:
    """How a delivery ended, to be recorded atomically with its removal from the queue.

    * ``success``: ``result`` is the encoded return value (``None`` keeps no result);
    * ``retry``: back to the schedule, due at ``due``;
    * ``dead``: to the dead letters; ``result`` is set when the job keeps results, so a
      waiting ``get()`` learns of the failure;
    * ``release``: back to the queue as it was; ``uncount`` takes back a counted try
      (a job cancelled by a graceful stop).
    """

    kind: OutcomeKind
    ticket: bytes
    id: str
    at: float
    result: bytes | None = None
    error: ErrorInfo | None = None
    due: float | None = None
    uncount: bool = False
    slot: str = ""
    """The job's name if its delivery holds a concurrency slot (freed with the outcome)."""


@dataclass(frozen=True, slots=True)
class Abandoned:
    """A delivery held by an executor that stopped beating (for recovery)."""

    ticket: bytes
    id: str
    name: str
    status: JobStatus
    started: bool
    """Whether the executor had started it (its try was counted), rather than only read it."""
    tries: int
    retries: int
    results: bool


@dataclass(frozen=True, slots=True)
class JobRecord:
    """Everything the store knows of one job (``runnel jobs show``, ``JobResult.get``)."""

    id: str
    name: str
    status: JobStatus
    payload: bytes
    codec: str
    tries: int
    retries: int
    results: bool
    created: float | None = None
    due: float | None = None
    started: float | None = None
    finished: float | None = None
    executor: str | None = None
    error: ErrorInfo | None = None
    result: bytes | None = None
    """The stored result item, as :func:`runnel.jobs.codec.read_item` reads it."""
    progress: Progress | None = None
    """The last progress reported, by whichever try reported it."""
    queue: str = DEFAULT_QUEUE
    waiting: str | None = None
    """Why its last start was put off (``"rate"`` or ``"concurrency"``), until admitted."""
    workflow: str | None = None
    """The id of the workflow it belongs to, if any."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One entry of the dead letters."""

    ticket: bytes
    id: str
    name: str
    error: str
    at: float
    """When it died."""
    queue: str = DEFAULT_QUEUE
    """The queue it was in (a replay puts it back there)."""


@dataclass(slots=True)
class ExecutorState:
    """A job executor as it last described itself, and whether its heartbeat is fresh."""

    id: str
    alive: bool
    info: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JobTotals:
    """Tries finished since the queue began, by how they ended: counters that only grow,
    recorded by the store together with the outcomes themselves, so that their growth
    between two reads over the time between the reads is the rate of that interval (the
    executors' own counts reach the store with their heartbeat only)."""

    succeeded: int = 0
    retried: int = 0
    """Tries that failed and will be tried again."""
    dead: int = 0
    """Jobs that failed for good (went to the dead letters)."""


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """The counts of the job queue; ``queues`` breaks them down by named queue."""

    queued: int
    """Waiting in the queue (due now, not taken yet)."""
    executing: int
    """Taken by a worker and not finished."""
    scheduled: int
    """Waiting for a later time (countdown, eta, or a retry's backoff)."""
    dead: int
    results: int
    """Results stored and not yet expired."""
    next_due: float | None = None
    cancelled: int = 0
    """Cancelled jobs whose record is kept (``results_ttl`` after the cancel)."""
    queues: dict[str, QueueCounts] = field(default_factory=dict, compare=False)
    """Per queue (every queue that holds or held jobs, the default one always): its
    queued, executing, scheduled, dead and next_due (``results``, ``cancelled`` and
    ``totals`` 0: kept per app)."""
    totals: JobTotals = field(default_factory=JobTotals)
    """Tries finished since the queue began (per app)."""
