"""JobStore with named queues: each job stays in the queue it was enqueued to, a take follows
its plan (quotas first, then the rest in order, all in one step), and every call that names
no queue (promotion, recovery, counts, dead letters) covers them all (docs/jobs.md, "Queues
and priorities")."""

from __future__ import annotations

import asyncio

import pytest

from runnel.jobs import JobStatus, ManualClock
from runnel.jobs.model import ErrorInfo, NewJob, Outcome
from runnel.jobs.queues import DEFAULT_QUEUE
from runnel.store import Backend, JobStore

T0 = 1_700_000_000.0
TTL = 60.0
BOOM = ErrorInfo("ValueError", "boom", "Traceback...")
CLOCK = ManualClock(T0)


@pytest.fixture
def store(backend: Backend, app: str) -> JobStore:
    return backend.job_store(app)


def new(job_id: str, queue: str = DEFAULT_QUEUE, due: float | None = None) -> NewJob:
    return NewJob(job_id, "add", b'{"args":[1]}', "json", 2, True, T0, due, queue=queue)


def order(plan: list[tuple[str, int]]) -> list[str]:
    return [name for name, _ in plan]


async def test_a_take_follows_its_plan_in_strict_order(store: JobStore) -> None:
    await store.prepare(["critical", "default", "bulk"])
    await store.enqueue(
        [new("b1", "bulk"), new("d1"), new("c1", "critical"), new("c2", "critical")]
    )
    plan = [("critical", 3), ("default", 3), ("bulk", 3)]
    taken = await store.take("e1", 3, 0, CLOCK, plan)
    assert [(d.id, d.queue) for d in taken] == [
        ("c1", "critical"),
        ("c2", "critical"),
        ("d1", DEFAULT_QUEUE),
    ]
    assert [(d.id, d.queue, d.tries) for d in await store.take("e1", 3, 0, CLOCK, plan)] == [
        ("b1", "bulk", 1)
    ]
    record = await store.job("c1")
    assert record is not None
    assert (record.queue, record.status, record.executor) == ("critical", JobStatus.EXECUTING, "e1")


async def test_quotas_come_first_then_the_rest_in_order(store: JobStore) -> None:
    await store.prepare(["critical", "bulk"])
    await store.enqueue([new(f"c{n}", "critical") for n in range(3)])
    await store.enqueue([new(f"b{n}", "bulk") for n in range(3)])
    taken = await store.take("e1", 4, 0, CLOCK, [("bulk", 1), ("critical", 1)])
    assert [d.id for d in taken] == ["b0", "c0", "b1", "b2"]
    assert [d.id for d in await store.take("e1", 9, 0, CLOCK, [("bulk", 0), ("critical", 0)])] == [
        "c1",
        "c2",
    ]


async def test_a_take_never_reaches_a_queue_it_does_not_name(store: JobStore) -> None:
    await store.prepare(["critical", "bulk"])
    await store.enqueue([new("c1", "critical"), new("b1", "bulk")])
    assert await store.take("e1", 5, 0, CLOCK) == []  # no plan: the default queue alone
    assert [d.id for d in await store.take("e1", 5, 0, CLOCK, [("bulk", 5)])] == ["b1"]
    assert await store.take("e1", 5, 0, CLOCK, [("bulk", 5)]) == []
    await store.enqueue([new("d1")])
    assert [d.id for d in await store.take("e1", 5, 0, CLOCK)] == ["d1"]


async def test_retries_releases_and_replays_stay_in_their_queue(store: JobStore) -> None:
    emails = [("emails", 5)]
    await store.prepare([DEFAULT_QUEUE, "emails"])
    await store.enqueue([new("m", "emails")])
    [d] = await store.take("e1", 1, 0, CLOCK, emails)
    retry = Outcome("retry", d.ticket, d.id, T0, error=BOOM, due=T0 + 5)
    assert await store.finish("e1", [retry], TTL) == []
    assert (await store.counts(T0)).queues["emails"].scheduled == 1
    assert await store.promote_due(T0 + 5, 10) == 1
    assert await store.take("e1", 5, 0, CLOCK) == []
    [d] = await store.take("e1", 1, 0, CLOCK, emails)
    assert (d.id, d.tries, d.queue) == ("m", 2, "emails")
    back = Outcome("release", d.ticket, d.id, T0, uncount=True)
    assert await store.finish("e1", [back], TTL) == []
    [d] = await store.take("e1", 1, 0, CLOCK, emails)
    assert (d.id, d.tries) == ("m", 2)
    dead = Outcome("dead", d.ticket, d.id, T0 + 1, error=BOOM)
    assert await store.finish("e1", [dead], TTL) == []
    [letter] = await store.dead_letters()
    assert (letter.id, letter.queue, letter.error) == ("m", "emails", "ValueError: boom")
    assert await store.replay([letter], T0 + 2) == 1
    assert await store.take("e1", 5, 0, CLOCK) == []
    [d] = await store.take("e1", 1, 0, CLOCK, emails)
    assert (d.id, d.tries, d.queue) == ("m", 1, "emails")
    await store.finish("e1", [Outcome("dead", d.ticket, d.id, T0 + 3, error=BOOM)], TTL)
    assert await store.purge(await store.dead_letters()) == 1
    assert await store.status("m") == JobStatus.UNKNOWN


async def test_a_countdown_waits_in_its_queue_schedule(store: JobStore) -> None:
    await store.prepare([DEFAULT_QUEUE, "reports"])
    await store.enqueue([new("r", "reports", due=T0 + 10), new("d", due=T0 + 20)])
    counts = await store.counts(T0)
    assert counts.scheduled == 2
    assert counts.queues["reports"].next_due == T0 + 10
    assert counts.queues[DEFAULT_QUEUE].next_due == T0 + 20
    assert await store.promote_due(T0 + 20, 1) == 1
    assert await store.promote_due(T0 + 20, 1) == 1
    assert [d.id for d in await store.take("e1", 5, 0, CLOCK)] == ["d"]
    assert [d.id for d in await store.take("e1", 5, 0, CLOCK, [("reports", 5)])] == ["r"]


async def test_counts_per_queue(store: JobStore) -> None:
    assert set((await store.counts(T0)).queues) == {DEFAULT_QUEUE}
    await store.prepare([DEFAULT_QUEUE, "emails", "bulk"])
    await store.enqueue([new("d1"), new("d2"), new("m1", "emails"), new("m2", "emails")])
    await store.enqueue([new("m3", "emails", due=T0 + 9), new("b1", "bulk")])
    [m1] = await store.take("e1", 1, 0, CLOCK, [("emails", 1)])
    [b1] = await store.take("e1", 1, 0, CLOCK, [("bulk", 1)])
    await store.finish("e1", [Outcome("dead", b1.ticket, b1.id, T0, error=BOOM)], TTL)
    counts = await store.counts(T0)
    shown = {
        name: (c.queued, c.executing, c.scheduled, c.dead) for name, c in counts.queues.items()
    }
    assert shown == {DEFAULT_QUEUE: (2, 0, 0, 0), "emails": (1, 1, 1, 0), "bulk": (0, 0, 0, 1)}
    assert (counts.queued, counts.executing, counts.scheduled, counts.dead) == (3, 1, 1, 1)
    assert counts.next_due == T0 + 9
    assert m1.id == "m1"


async def test_dead_letters_of_every_queue_oldest_first(store: JobStore) -> None:
    plan = [("a", 1), ("default", 1), ("b", 1)]
    await store.prepare(order(plan))
    await store.enqueue([new("x", "a"), new("y"), new("z", "b")])
    for n in range(3):
        [d] = await store.take("e1", 1, 0, CLOCK, plan)
        await store.finish("e1", [Outcome("dead", d.ticket, d.id, T0 + n, error=BOOM)], TTL)
    letters = await store.dead_letters()
    assert [(x.id, x.queue) for x in letters] == [("x", "a"), ("y", DEFAULT_QUEUE), ("z", "b")]
    assert [x.id for x in await store.dead_letters(limit=2)] == ["x", "y"]
    assert await store.replay(letters, T0 + 5) == 3
    assert [d.queue for d in await store.take("e2", 5, 0, CLOCK, plan)] == ["a", "default", "b"]


async def test_take_blocks_until_a_job_arrives_in_any_queue(store: JobStore) -> None:
    plan = [("critical", 1), ("bulk", 1)]
    await store.prepare(order(plan))
    taker = asyncio.create_task(store.take("e1", 1, 5000, CLOCK, plan))
    await asyncio.sleep(0.05)
    assert not taker.done()
    await store.enqueue([new("b", "bulk")])
    [d] = await asyncio.wait_for(taker, 10)
    assert (d.id, d.queue) == ("b", "bulk")
    assert await store.take("e1", 1, 10, CLOCK, plan) == []


async def test_recovery_and_forgetting_cover_every_queue(store: JobStore) -> None:
    plan = [("emails", 5)]
    await store.prepare([DEFAULT_QUEUE, "emails"])
    await store.enqueue([new("m", "emails"), new("d")])
    await store.beat("e1", {"pid": 1}, 30)
    [m] = await store.take("e1", 1, 0, CLOCK, plan)
    [d] = await store.take("e1", 1, 0, CLOCK)
    lost = await store.abandoned("e1", 10)
    assert sorted((a.id, a.started) for a in lost) == [("d", True), ("m", True)]
    assert {a.ticket for a in lost} == {m.ticket, d.ticket}
    await store.leave("e1")
    assert not await store.forget("e1")  # still holds both
    back = [Outcome("release", a.ticket, a.id, T0, uncount=True) for a in lost]
    assert await store.finish("e1", back[:1], TTL, only_if_dead=True) == []
    assert not await store.forget("e1")  # still holds one
    assert await store.finish("e1", back[1:], TTL, only_if_dead=True) == []
    assert await store.abandoned("e1", 10) == []
    assert await store.forget("e1")
    assert [x.id for x in await store.take("e2", 5, 0, CLOCK, [*plan, ("default", 5)])] == [
        "m",
        "d",
    ]
