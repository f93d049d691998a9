"""Workflows in the in-memory job queue, with the Redis store's semantics
(lua/job_workflow.lua): the hooks :class:`JobQueueState` calls, under its lock, when it
records a job's success, death or cancel, and the store's workflow calls."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from runnel.jobs import codec
from runnel.jobs.model import JobStatus
from runnel.jobs.workflow_model import (
    WORKFLOW_ENDED,
    NewWorkflow,
    WorkflowMember,
    WorkflowRecord,
    WorkflowStatus,
)
from runnel.memory.job_records import StoredJob, StoredResult, Waiter, ms, seconds
from runnel.store.identity import CallIdentity, call_key
from runnel.store.workflows import WorkflowStore

CANCEL_LINE = "JobCancelled: the job was cancelled"


@dataclass(slots=True)
class StoredFlow:
    """A workflow's record (the Redis store's workflow hash), times in milliseconds."""

    shape: str
    created: int
    members: list[str]
    result: Any
    left: int
    """Members (the error handler aside) not counted done yet."""
    on_error: str | None = None
    status: WorkflowStatus = WorkflowStatus.RUNNING
    finished: int | None = None
    failed: str | None = None
    error: str | None = None
    waits: dict[str, int] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)
    expires: float | None = None
    call: bytes | None = None
    """The enqueue call that stored it (its identity's key), to know that call's retry."""


@dataclass(slots=True)
class FlowBook:
    """Every workflow of one app's job queue, and who waits for one to end."""

    flows: dict[str, StoredFlow] = field(default_factory=dict)
    waiters: dict[str, list[Waiter]] = field(default_factory=dict)

    def get(self, flow_id: str) -> StoredFlow | None:
        flow = self.flows.get(flow_id)
        if flow is not None and flow.expires is not None and flow.expires <= time.monotonic():
            del self.flows[flow_id]
            return None
        return flow


class FlowState(Protocol):
    """What the hooks need of :class:`runnel.memory.jobs.JobQueueState`."""

    lock: threading.Lock
    jobs: dict[str, StoredJob]
    results: dict[str, StoredResult]
    cancels: dict[str, int]
    flows: FlowBook

    def record(self, job_id: str) -> StoredJob | None: ...
    def result(self, job_id: str) -> bytes | None: ...
    def push(self, job_id: str, queue: str) -> None: ...
    def store_result(self, job_id: str, item: bytes, expires: float | None) -> None: ...
    def cancel(self, job_id: str, at: int, ttl_ms: int) -> JobStatus: ...


def _flow_of(s: FlowState, job: StoredJob) -> StoredFlow | None:
    if job.workflow is None:
        return None
    flow = s.flows.get(job.workflow)
    return flow if flow is not None and flow.status == WorkflowStatus.RUNNING else None


def succeeded(s: FlowState, job_id: str, at: int, ttl_ms: int) -> None:
    """A job's success was recorded: count it once for its workflow and queue each job
    that waited for it alone; the workflow is COMPLETE with its last member."""
    job = s.jobs[job_id]
    flow = _flow_of(s, job)
    if flow is None:
        return
    job.expires = None  # kept, and its result, until the workflow ends
    kept = s.results.get(job_id)
    if kept is not None:
        kept.expires = None
    if job_id in flow.done:
        return
    flow.done.add(job_id)
    for waiting in job.then:
        flow.waits[waiting] -= 1
        if flow.waits[waiting] == 0:
            _release(s, waiting)
    flow.left -= 1
    if flow.left == 0:
        _end(s, job.workflow or "", flow, WorkflowStatus.COMPLETE, at, ttl_ms)


def failed(s: FlowState, job_id: str, at: int, ttl_ms: int, line: str) -> None:
    """A job ended DEAD or was cancelled: its workflow fails; the error handler is queued,
    the other waiting jobs are cancelled."""
    job = s.jobs.get(job_id)
    flow = None if job is None else _flow_of(s, job)
    if job is None or flow is None or flow.on_error == job_id:
        return
    flow.failed, flow.error = job_id, line
    if flow.on_error is not None:
        _release(s, flow.on_error)
    _end(s, job.workflow or "", flow, WorkflowStatus.FAILED, at, ttl_ms)


def _release(s: FlowState, job_id: str) -> None:
    job = s.jobs.get(job_id)
    if job is not None and job.status == JobStatus.WAITING:
        job.status = JobStatus.SENT
        s.push(job_id, job.queue)


def _end(
    s: FlowState, flow_id: str, flow: StoredFlow, status: WorkflowStatus, at: int, ttl: int
) -> None:
    """The workflow ends: its waiting jobs are cancelled; it, and its jobs that ended,
    expire after ``ttl`` (a DEAD one stays, as dead letters do)."""
    flow.status, flow.finished = status, at
    expires = time.monotonic() + ttl / 1000
    flow.expires = expires
    for job_id in flow.members:
        job = s.jobs.get(job_id)
        if job is None:
            continue
        if job.status == JobStatus.WAITING:
            job.status, job.finished = JobStatus.CANCELLED, at
            s.cancels[job_id] = at + ttl
            s.store_result(job_id, codec.CANCELLED, expires)
        if job.status in (JobStatus.SUCCESS, JobStatus.CANCELLED):
            job.expires = expires
            kept = s.results.get(job_id)
            if kept is not None:
                kept.expires = expires
    for waiter in s.flows.waiters.pop(flow_id, []):
        waiter.wake()


class MemoryWorkflows(WorkflowStore):
    """The workflow calls of :class:`runnel.memory.jobs.MemoryJobStore`."""

    state: FlowState

    async def enqueue_workflow(
        self, flow: NewWorkflow, *, call: CallIdentity | None = None
    ) -> bool:
        s = self.state
        token = None if call is None else call_key(call)
        with s.lock:
            found = s.flows.get(flow.id)
            if found is not None:
                return token is not None and found.call == token
            if any(s.record(one.job.id) is not None for one in flow.jobs):
                return False
            handler = next((one.job.id for one in flow.jobs if one.on_error), None)
            s.flows.flows[flow.id] = StoredFlow(
                shape=flow.shape,
                created=ms(flow.created),
                members=[one.job.id for one in flow.jobs],
                result=flow.result,
                left=sum(1 for one in flow.jobs if not one.on_error),
                on_error=handler,
                waits={one.job.id: one.waits for one in flow.jobs if one.waits},
                call=token,
            )
            for one in flow.jobs:
                new = one.job
                s.jobs[new.id] = StoredJob(
                    name=new.name,
                    payload=new.payload,
                    codec=new.codec,
                    retries=new.retries,
                    results=new.results,
                    created=ms(new.created),
                    queue=new.queue,
                    status=JobStatus.WAITING,
                    workflow=flow.id,
                    then=tuple(one.then),
                )
            for one in flow.jobs:
                if not one.waits and not one.on_error:
                    _release(s, one.job.id)
        return True

    async def workflow(self, workflow_id: str) -> WorkflowRecord | None:
        s = self.state
        with s.lock:
            flow = s.flows.get(workflow_id)
            if flow is None:
                return None
            members = []
            for job_id in flow.members:
                job = s.record(job_id)
                name = job.name if job is not None else ""
                status = job.status if job is not None else JobStatus.UNKNOWN
                members.append(WorkflowMember(job_id, name, status))
            return WorkflowRecord(
                id=workflow_id,
                shape=flow.shape,
                status=flow.status,
                created=seconds(flow.created),
                finished=seconds(flow.finished),
                members=members,
                result=flow.result,
                failed=flow.failed,
                error=flow.error,
                on_error=flow.on_error,
            )

    async def workflows(self, limit: int) -> list[WorkflowRecord]:
        with self.state.lock:
            ids = list(self.state.flows.flows)
        ids.reverse()  # newest first: in the order enqueued
        out: list[WorkflowRecord] = []
        for flow_id in ids:
            if len(out) >= limit:
                break
            record = await self.workflow(flow_id)
            if record is not None:
                out.append(record)
        return out

    async def member_results(self, job_ids: Sequence[str]) -> list[tuple[str, bytes | None]]:
        s = self.state
        with s.lock:
            out: list[tuple[str, bytes | None]] = []
            for job_id in job_ids:
                job = s.record(job_id)
                out.append((job.codec if job is not None else "json", s.result(job_id)))
            return out

    async def wait_workflow(self, workflow_id: str, within: float) -> bool:
        s = self.state

        def ended() -> bool:
            flow = s.flows.get(workflow_id)
            return flow is None or flow.status in WORKFLOW_ENDED

        return await self._until(ended, lambda: s.flows.waiters.setdefault(workflow_id, []), within)  # type: ignore[attr-defined]

    async def cancel_workflow(
        self, workflow_id: str, at: float, results_ttl: float
    ) -> WorkflowStatus:
        s = self.state
        with s.lock:
            flow = s.flows.get(workflow_id)
            if flow is None:
                return WorkflowStatus.UNKNOWN
            before = flow.status
            if before != WorkflowStatus.RUNNING:
                return before
            _end(s, workflow_id, flow, WorkflowStatus.CANCELLED, ms(at), ms(results_ttl))
            for job_id in flow.members:
                s.cancel(job_id, ms(at), ms(results_ttl))
        return before
