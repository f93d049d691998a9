"""WorkflowStore: workflows driven call by call on every store (memory://, Redis, a Redis
Cluster). A waiting job is queued in the step that records the last success it waits
for, and a member's success counts once, however often it is recorded: so a chord's
callback is released exactly once. A member that ends DEAD or is cancelled fails the
workflow and releases the error handler once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runnel.jobs import JobStatus, ManualClock, WorkflowStatus
from runnel.jobs.codec import CANCELLED
from runnel.jobs.model import NewJob, Outcome
from runnel.jobs.workflow_model import FlowJob, NewWorkflow
from runnel.memory.jobs import MemoryJobStore
from runnel.store import Backend, JobStore
from runnel.store.identity import Producer
from runnel.store.workflows import WorkflowStore
from tests.contract.test_jobs import BOOM, T0, TTL


@pytest.fixture
def store(backend: Backend, app: str) -> Any:
    found = backend.job_store(app)
    if not isinstance(found, WorkflowStore):
        pytest.skip(f"optional part not offered: {type(found).__name__} has no workflows")
    return found


def job(
    job_id: str, waits: int = 0, then: tuple[str, ...] = (), *, on_error: bool = False
) -> FlowJob:
    new = NewJob(job_id, "add", b'{"args":[1]}', "json", 0, True, T0)
    return FlowJob(new, waits=waits, then=list(then), on_error=on_error)


def chord_of(
    wid: str, members: list[str], callback: str, handler: str | None = None
) -> NewWorkflow:
    jobs = [job(m, then=(callback,)) for m in members]
    jobs.append(job(callback, waits=len(members)))
    if handler is not None:
        jobs.append(job(handler, on_error=True))
    return NewWorkflow(wid, "chord", T0, jobs, callback)


async def run(store: Any, executor: str = "e1", count: int = 10) -> list[Any]:
    return list(await store.take(executor, count, 0, ManualClock(T0)))


async def succeed(store: JobStore, deliveries: list[Any], value: bytes = b"v1") -> None:
    outcomes = [Outcome("success", d.ticket, d.id, T0 + 1, result=value) for d in deliveries]
    assert await store.finish("e1", outcomes, TTL) == []


async def duplicate_entry(store: Any, job_id: str) -> None:
    """A second queue entry for a job, as a duplicate delivery would give: the job then
    runs (and succeeds) a second time."""
    if isinstance(store, MemoryJobStore):
        with store.state.lock:
            store.state.push(job_id, "default")
    else:
        await store.redis.xadd(store.queue, {"id": job_id})


async def test_a_chain_releases_each_step_with_the_previous_result(store: Any) -> None:
    await store.prepare()
    flow = NewWorkflow("w1", "chain(add, add)", T0, [job("a", then=("b",)), job("b", waits=1)], "b")
    assert await store.enqueue_workflow(flow) is True
    assert await store.status("b") == JobStatus.WAITING
    record = await store.job("b")
    assert record is not None and record.workflow == "w1"
    [a] = await run(store)
    assert a.id == "a" and await run(store) == []  # b waits
    await succeed(store, [a], b"v7")
    assert await store.status("b") == JobStatus.SENT
    assert await store.member_results(["a"]) == [("json", b"v7")]
    [b] = await run(store)
    assert b.id == "b"
    assert (await store.workflow("w1")).status == WorkflowStatus.RUNNING
    await succeed(store, [b], b"v8")
    record = await store.workflow("w1")
    assert (record.status, record.finished, record.result) == (WorkflowStatus.COMPLETE, T0 + 1, "b")
    assert [(m.id, m.status) for m in record.members] == [
        ("a", JobStatus.SUCCESS),
        ("b", JobStatus.SUCCESS),
    ]
    assert await store.wait_workflow("w1", 0.01) is True


async def test_a_chord_callback_waits_for_every_member(store: Any) -> None:
    await store.prepare()
    assert await store.enqueue_workflow(chord_of("w1", ["a", "b", "c"], "cb"))
    taken = await run(store)
    assert sorted(d.id for d in taken) == ["a", "b", "c"]
    await succeed(store, taken[:2])
    assert await store.status("cb") == JobStatus.WAITING
    assert await store.wait_workflow("w1", 0.01) is False
    await succeed(store, taken[2:])
    [cb] = await run(store)
    assert cb.id == "cb"
    assert [item for _, item in await store.member_results(["a", "b", "c"])] == [b"v1"] * 3


async def test_a_member_that_succeeds_twice_counts_once(store: Any) -> None:
    await store.prepare()
    await store.enqueue_workflow(chord_of("w1", ["a", "b"], "cb"))
    first = await run(store)
    await succeed(store, [d for d in first if d.id == "a"])
    await duplicate_entry(store, "a")  # a runs again, and succeeds again
    [again] = await run(store)
    assert again.id == "a"
    await succeed(store, [again])
    assert await store.status("cb") == JobStatus.WAITING  # still waits for b
    await succeed(store, [d for d in first if d.id == "b"])
    await duplicate_entry(store, "b")  # after the callback was released: runs again too
    taken = await run(store)
    assert [d.id for d in taken] == ["cb", "b"]
    await succeed(store, taken[1:])
    assert await run(store) == []  # the callback was released once


async def test_a_late_outcome_of_a_member_taken_back_releases_nothing(store: Any) -> None:
    await store.prepare()
    await store.enqueue_workflow(chord_of("w1", ["a"], "cb"))
    [stale] = await run(store, "e1")
    await store.beat("e1", {}, 0.05)
    await asyncio.sleep(0.1)  # e1's heartbeat lapses: presumed dead
    [gone] = await store.abandoned("e1", 10)
    back = Outcome("release", gone.ticket, gone.id, T0, uncount=True)
    assert await store.finish("e1", [back], TTL, only_if_dead=True) == []
    [fresh] = await run(store, "e2")
    done = Outcome("success", fresh.ticket, fresh.id, T0 + 1, result=b"v2")
    assert await store.finish("e2", [done], TTL) == []
    late = Outcome("success", stale.ticket, stale.id, T0 + 2, result=b"v1")
    assert await store.finish("e1", [late], TTL) == ["a"]  # refused
    assert [d.id for d in await run(store, "e2")] == ["cb"]
    assert await run(store, "e2") == []
    assert await store.member_results(["a"]) == [("json", b"v2")]


async def test_a_dead_member_fails_the_workflow_and_releases_the_handler_once(store: Any) -> None:
    await store.prepare()
    await store.enqueue_workflow(chord_of("w1", ["a", "b"], "cb", handler="h"))
    taken = await run(store)
    dead = [Outcome("dead", d.ticket, d.id, T0 + 3, error=BOOM) for d in taken]
    assert await store.finish("e1", dead[:1], TTL) == []
    record = await store.workflow("w1")
    assert (record.status, record.failed, record.error) == (
        WorkflowStatus.FAILED,
        taken[0].id,
        "ValueError: boom",
    )
    assert record.on_error == "h"
    assert await store.status("cb") == JobStatus.CANCELLED
    assert await store.wait_result("cb", 0.01) == CANCELLED
    assert await store.finish("e1", dead[1:], TTL) == []  # a second death: nothing more
    assert [d.id for d in await run(store)] == ["h"]
    assert await run(store) == []
    assert (await store.workflow("w1")).failed == taken[0].id
    assert await store.wait_workflow("w1", 0.01) is True


async def test_a_member_cancelled_fails_the_workflow(store: Any) -> None:
    await store.prepare()
    await store.enqueue_workflow(chord_of("w1", ["a", "b"], "cb", handler="h"))
    assert await store.cancel("a", T0 + 1, TTL) == JobStatus.SENT
    record = await store.workflow("w1")
    assert (record.status, record.failed, record.error) == (
        WorkflowStatus.FAILED,
        "a",
        "JobCancelled: the job was cancelled",
    )
    assert sorted(d.id for d in await run(store)) == ["b", "h"]


async def test_cancel_a_workflow(store: Any) -> None:
    await store.prepare()
    await store.enqueue_workflow(chord_of("w1", ["a", "b"], "cb", handler="h"))
    await store.beat("e1", {}, 30)
    [a] = await run(store, count=1)
    assert await store.cancel_workflow("w1", T0 + 1, TTL) == WorkflowStatus.RUNNING
    assert await store.cancel_workflow("w1", T0 + 2, TTL) == WorkflowStatus.CANCELLED
    assert await store.cancel_workflow("nope", T0 + 2, TTL) == WorkflowStatus.UNKNOWN
    record = await store.workflow("w1")
    assert record.status == WorkflowStatus.CANCELLED
    assert {m.id: m.status for m in record.members} == {
        "a": JobStatus.CANCELLED,
        "b": JobStatus.CANCELLED,
        "cb": JobStatus.CANCELLED,
        "h": JobStatus.CANCELLED,
    }
    assert await store.cancelled("e1", 0) == ["a"]  # its executor is told
    assert await store.finish("e1", [Outcome("success", a.ticket, "a", T0 + 3)], TTL) == ["a"]
    assert await run(store) == []
    assert await store.wait_workflow("w1", 0.01) is True


async def test_member_results_outlive_their_ttl_while_the_workflow_runs(store: Any) -> None:
    await store.prepare()
    await store.enqueue_workflow(chord_of("w1", ["a", "b"], "cb"))
    taken = await run(store)
    early = Outcome("success", taken[0].ticket, taken[0].id, T0 + 1, result=b"v1")
    assert await store.finish("e1", [early], 0.05) == []
    await asyncio.sleep(0.2)  # past that job's results ttl
    assert await store.member_results([taken[0].id]) == [("json", b"v1")]
    assert await store.status(taken[0].id) == JobStatus.SUCCESS


async def test_a_workflow_is_stored_whole_or_not_at_all(store: Any) -> None:
    await store.prepare()
    await store.enqueue([NewJob("b", "add", b"{}", "json", 0, True, T0)])
    assert await store.enqueue_workflow(chord_of("w1", ["a", "b"], "cb")) is False
    assert await store.workflow("w1") is None
    assert await store.status("a") == JobStatus.UNKNOWN
    assert [d.id for d in await run(store)] == ["b"]  # only the job enqueued before
    assert await store.enqueue_workflow(chord_of("w2", ["x"], "cy")) is True
    assert await store.enqueue_workflow(chord_of("w2", ["z"], "cz")) is False
    assert [w.id for w in await store.workflows(10)] == ["w2"]


async def test_a_workflow_sent_again_under_its_call_is_answered_as_the_first_time(
    store: Any,
) -> None:
    """A lost reply's retry: the same call finds the workflow it stored (True), stores
    and queues nothing twice; another call, or one without identity, gets False."""
    await store.prepare()
    producer = Producer()
    call = producer.call()
    flow = chord_of("w1", ["a", "b"], "cb")
    assert await store.enqueue_workflow(flow, call=call) is True
    assert await store.enqueue_workflow(flow, call=call.retried()) is True
    assert await store.enqueue_workflow(flow, call=producer.call()) is False
    assert await store.enqueue_workflow(flow) is False
    assert [w.id for w in await store.workflows(10)] == ["w1"]
    assert sorted(d.id for d in await run(store)) == ["a", "b"]  # each queued once
