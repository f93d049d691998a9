"""What a job workflow is made of: its statuses, errors, and the values that cross the
store seam (docs/jobs.md, "Workflows").

A workflow is a set of jobs enqueued together. Jobs with nothing to wait for are queued
at once; the others (a chain's next step, a chord's callback) are stored WAITING and are
queued by the store, in the very step that records the last of their predecessors'
successes. A predecessor's success is counted once, whatever ran twice: so a callback is
released exactly once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from runnel.jobs.model import JobError, JobStatus, NewJob


@enum.unique
class WorkflowStatus(enum.StrEnum):
    UNKNOWN = "UNKNOWN"
    """No such workflow: never enqueued, or ended and expired (``results_ttl``)."""
    RUNNING = "RUNNING"
    """Some of its jobs have not succeeded yet."""
    COMPLETE = "COMPLETE"
    """Every job succeeded; the result is kept for ``results_ttl``."""
    FAILED = "FAILED"
    """A job ended DEAD or was cancelled: the jobs waiting were cancelled."""
    CANCELLED = "CANCELLED"
    """Cancelled as a whole (``handle.cancel()``)."""


WORKFLOW_ENDED = frozenset(
    {WorkflowStatus.COMPLETE, WorkflowStatus.FAILED, WorkflowStatus.CANCELLED}
)


class InvalidWorkflow(JobError, ValueError):
    """The workflow cannot be built: it contains itself, is empty, names an undeclared job,
    mixes apps, or puts ``on_error`` anywhere but on the outermost part."""


class WorkflowFailed(JobError):
    """A job of the workflow ended DEAD or was cancelled; names it and its error."""

    def __init__(self, workflow_id: str, job_id: str, job_name: str, error: str) -> None:
        super().__init__(f"workflow {workflow_id!r} failed: job {job_name} {job_id}: {error}")
        self.workflow_id = workflow_id
        self.job_id = job_id
        self.job_name = job_name
        self.error = error


class WorkflowCancelled(JobError):
    """The workflow was cancelled as a whole: no result."""

    def __init__(self, workflow_id: str) -> None:
        super().__init__(f"workflow {workflow_id!r} was cancelled")
        self.workflow_id = workflow_id


@dataclass(slots=True)
class FlowJob:
    """One job of a workflow to enqueue, with its place in the graph."""

    job: NewJob
    waits: int = 0
    """How many predecessors must succeed before it is queued (0: queued at once)."""
    then: list[str] = field(default_factory=list)
    """The ids of the jobs that wait for this one."""
    on_error: bool = False
    """The workflow's error handler: queued only if the workflow fails."""


@dataclass(slots=True)
class NewWorkflow:
    """A workflow to enqueue, whole, in one atomic store call."""

    id: str
    shape: str
    """A short description (``chord(group(add x 200), total)``), for people."""
    created: float
    jobs: list[FlowJob]
    """In the order written; the error handler, if any, last."""
    result: Any
    """Which jobs' results make the workflow's: a job id, or a (nested) list of them."""


@dataclass(frozen=True, slots=True)
class WorkflowMember:
    id: str
    name: str
    status: JobStatus


@dataclass(frozen=True, slots=True)
class WorkflowRecord:
    """Everything the store knows of one workflow (``runnel jobs show``, ``handle.get``)."""

    id: str
    shape: str
    status: WorkflowStatus
    created: float | None
    finished: float | None
    members: list[WorkflowMember]
    """Every job, in the order written; the error handler, if any, last."""
    result: Any
    failed: str | None = None
    """The job whose end failed the workflow."""
    error: str | None = None
    """Its error, on one line (``ValueError: boom``)."""
    on_error: str | None = None
    """The id of the error handler's job, if any."""

    def member(self, job_id: str) -> WorkflowMember | None:
        return next((m for m in self.members if m.id == job_id), None)


def leaves(expr: Any) -> list[str]:
    """The job ids of a result expression, in order."""
    if isinstance(expr, str):
        return [expr]
    return [job_id for part in expr or () for job_id in leaves(part)]
