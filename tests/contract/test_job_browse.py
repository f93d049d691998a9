"""JobStore: the lists the dashboard browses (jobs on the schedule, jobs ended lately) and
making a scheduled job due now, call by call, on every store."""

from __future__ import annotations

import dataclasses

import pytest

from runnel.jobs import JobStatus, ManualClock
from runnel.jobs.model import Outcome
from runnel.store import Backend, JobStore
from tests.contract.test_jobs import BOOM, T0, TTL, new


@pytest.fixture
def store(backend: Backend, app: str) -> JobStore:
    return backend.job_store(app)


async def test_scheduled_jobs_of_every_queue_soonest_first(store: JobStore) -> None:
    await store.prepare(["default", "bulk"])
    await store.enqueue(
        [
            new("late", due=T0 + 30),
            dataclasses.replace(new("soon", due=T0 + 10), queue="bulk"),
            new("now"),
            new("mid", due=T0 + 20),
        ]
    )
    assert await store.scheduled_jobs(10) == [
        ("soon", T0 + 10),
        ("mid", T0 + 20),
        ("late", T0 + 30),
    ]
    assert await store.scheduled_jobs(2) == [("soon", T0 + 10), ("mid", T0 + 20)]
    assert await store.scheduled_jobs(0) == []


async def test_a_scheduled_job_hastened_is_promoted_now(store: JobStore) -> None:
    await store.prepare(["default", "bulk"])
    await store.enqueue(
        [new("later", due=T0 + 100), dataclasses.replace(new("b", due=T0 + 100), queue="bulk")]
    )
    assert await store.hasten("later", T0 + 1)
    assert await store.hasten("b", T0 + 1)
    record = await store.job("later")
    assert record is not None and record.due == T0 + 1
    assert await store.promote_due(T0 + 1, 10) == 2
    assert [d.id for d in await store.take("e1", 5, 0, ManualClock(T0 + 1))] == ["later"]
    taken = await store.take("e1", 5, 0, ManualClock(T0 + 1), [("bulk", 5)])
    assert [d.id for d in taken] == ["b"]


async def test_a_retry_hastened_runs_its_next_try_now(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a")])
    [d] = await store.take("e1", 1, 0, ManualClock(T0))
    retry = Outcome("retry", d.ticket, d.id, T0, error=BOOM, due=T0 + 500)
    assert await store.finish("e1", [retry], TTL) == []
    assert await store.hasten("a", T0 + 1)
    assert await store.status("a") == JobStatus.RETRY
    assert await store.promote_due(T0 + 1, 10) == 1
    [again] = await store.take("e1", 1, 0, ManualClock(T0 + 2))
    assert (again.id, again.tries) == ("a", 2)


async def test_a_job_not_on_the_schedule_is_not_hastened(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("queued")])
    assert not await store.hasten("queued", T0)
    assert not await store.hasten("nosuch", T0)
    assert len(await store.take("e1", 1, 0, ManualClock(T0))) == 1
    assert not await store.hasten("queued", T0)  # running
    assert await store.scheduled_jobs(5) == []


async def test_ended_jobs_most_recent_first_until_their_records_expire(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a"), new("b"), new("c"), new("d")])
    taken = {d.id: d for d in await store.take("e1", 4, 0, ManualClock(T0))}
    done = [
        Outcome("success", taken["a"].ticket, "a", T0 + 1, result=b"1"),
        Outcome("success", taken["b"].ticket, "b", T0 + 3, result=b"2"),
        Outcome("dead", taken["c"].ticket, "c", T0 + 4, error=BOOM),
    ]
    assert await store.finish("e1", done, TTL) == []
    assert await store.cancel("d", T0 + 2, TTL) == JobStatus.EXECUTING
    assert await store.ended_jobs(T0 + 5, 10) == ["b", "d", "a"]
    assert await store.ended_jobs(T0 + 5, 2) == ["b", "d"]
    assert await store.ended_jobs(T0 + 1 + TTL, 10) == ["b", "d"]
