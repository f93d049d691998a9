"""JobStore.admit: rate and concurrency limits of jobs, call by call, on every store.

A job declared with limits is admitted before it runs; refused, its delivery ends, its try
is taken back and it waits on the schedule with the reason kept. Concurrency slots are
freed by the outcome that names them, by a cancel, and once their executor stops beating.
"""

from __future__ import annotations

import pytest

from runnel.jobs import JobStatus, ManualClock
from runnel.jobs.limits import GONE, Deferral, JobLimits, parse_rate
from runnel.jobs.model import NewJob, Outcome
from runnel.store import Backend, JobStore
from tests.contract.support import RealTime
from tests.contract.test_jobs import BOOM, T0, TTL, new

TWO = JobLimits(concurrency=2)
WAIT = 0.3


@pytest.fixture
def store(backend: Backend, app: str) -> JobStore:
    return backend.job_store(app)


async def started(store: JobStore, executor: str, count: int, clock: float = T0) -> list:
    await store.beat(executor, {}, TTL)
    return await store.take(executor, count, 0, ManualClock(clock))


async def test_slots_are_held_until_an_outcome_frees_them(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a"), new("b"), new("c")])
    a, b, c = await started(store, "e1", 3)
    assert await store.admit("e1", a, TWO, T0, WAIT) is None
    assert await store.admit("e1", b, TWO, T0, WAIT) is None
    assert await store.admit("e1", c, TWO, T0, WAIT) == Deferral("concurrency", T0 + WAIT)
    record = await store.job("c")
    assert record is not None
    assert (record.status, record.tries, record.due, record.waiting, record.executor) == (
        JobStatus.SENT,
        0,
        T0 + WAIT,
        "concurrency",
        None,
    )
    counts = await store.counts(T0)
    assert (counts.queued, counts.executing, counts.scheduled) == (0, 2, 1)
    # Its delivery ended: an outcome for it is refused.
    assert await store.finish("e1", [Outcome("success", c.ticket, "c", T0)], TTL) == ["c"]
    # A's outcome frees its slot: c, due again, is admitted.
    assert await store.finish("e1", [Outcome("success", a.ticket, "a", T0, slot="add")], TTL) == []
    assert await store.promote_due(T0 + WAIT, 10) == 1
    [again] = await store.take("e1", 1, 0, ManualClock(T0 + WAIT))
    assert (again.id, again.tries) == ("c", 1)
    assert await store.admit("e1", again, TWO, T0 + WAIT, WAIT) is None
    record = await store.job("c")
    assert record is not None
    assert (record.status, record.waiting) == (JobStatus.EXECUTING, None)


@pytest.mark.parametrize("kind", ["retry", "dead", "release"])
async def test_every_outcome_frees_its_slot(store: JobStore, kind: str) -> None:
    one = JobLimits(concurrency=1)
    await store.prepare()
    await store.enqueue([new("a"), new("b")])
    a, b = await started(store, "e1", 2)
    assert await store.admit("e1", a, one, T0, WAIT) is None
    outcome = Outcome(kind, a.ticket, "a", T0, error=BOOM, due=T0 + 60, slot="add")  # type: ignore[arg-type]
    assert await store.finish("e1", [outcome], TTL) == []
    assert await store.admit("e1", b, one, T0, WAIT) is None


async def test_an_outcome_without_the_slot_keeps_it(store: JobStore) -> None:
    one = JobLimits(concurrency=1)
    await store.prepare()
    await store.enqueue([new("a"), new("b")])
    a, b = await started(store, "e1", 2)
    assert await store.admit("e1", a, one, T0, WAIT) is None
    assert await store.finish("e1", [Outcome("success", a.ticket, "a", T0)], TTL) == []
    assert isinstance(await store.admit("e1", b, one, T0, WAIT), Deferral)


async def test_a_cancel_frees_the_slot_and_a_cancelled_delivery_is_gone(store: JobStore) -> None:
    one = JobLimits(concurrency=1)
    await store.prepare()
    await store.enqueue([new("a"), new("b"), new("c")])
    a, b, c = await started(store, "e1", 3)
    assert await store.admit("e1", a, one, T0, WAIT) is None
    assert await store.cancel("a", T0, TTL) == JobStatus.EXECUTING
    assert await store.cancel("c", T0, TTL) == JobStatus.EXECUTING
    assert await store.admit("e1", c, one, T0, WAIT) == GONE
    assert await store.admit("e1", b, one, T0, WAIT) is None


async def test_a_delivery_of_another_executor_is_gone(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a")])
    [a] = await started(store, "e1", 1)
    assert await store.admit("e2", a, TWO, T0, WAIT) == GONE
    assert await store.admit("e1", a, TWO, T0, WAIT) is None


async def test_a_dead_executors_slots_come_back_when_its_heartbeat_expires(
    store: JobStore,
) -> None:
    await store.prepare()
    await store.enqueue([new("a"), new("b"), new("c"), new("d")])
    await store.beat("dying", {}, 0.3)
    a, b = await store.take("dying", 2, 0, ManualClock(T0))
    assert await store.admit("dying", a, TWO, T0, WAIT) is None
    assert await store.admit("dying", b, TWO, T0, WAIT) is None
    c, d = await started(store, "e2", 2)
    assert isinstance(await store.admit("e2", c, TWO, T0, WAIT), Deferral)

    async def gone() -> bool:
        return not any(e.alive for e in await store.executors() if e.id == "dying")

    await RealTime().until(gone, "the heartbeat expires")
    assert await store.admit("e2", d, TWO, T0, WAIT) is None
    # Both of the dead executor's slots were freed: one is left for another job.
    await store.enqueue([new("e")])
    [e] = await store.take("e2", 1, 0, ManualClock(T0))
    assert await store.admit("e2", e, TWO, T0, WAIT) is None


async def test_a_rate_admits_its_burst_then_puts_off_to_the_next_turn(store: JobStore) -> None:
    hourly = JobLimits(rate=parse_rate("1/h"))  # a turn an hour: none comes during the test
    await store.prepare()
    await store.enqueue([new("a"), new("b"), new("c")])
    a, b, c = await started(store, "e1", 3)
    assert await store.admit("e1", a, hourly, T0, WAIT) is None
    put_off = await store.admit("e1", b, hourly, T0, WAIT)
    assert isinstance(put_off, Deferral)
    assert put_off.limit == "rate"
    # The next turn is an hour after the first start, less the burst tolerance (a tenth);
    # the store's clock moved on a little between the two calls.
    assert T0 + 3240 - 5 < put_off.due <= T0 + 3240
    # The next job put off is promised the turn after: the jobs put off come back in line.
    after = await store.admit("e1", c, hourly, T0, WAIT)
    assert isinstance(after, Deferral)
    assert (after.limit, after.due) == ("rate", pytest.approx(put_off.due + 3600, abs=5))
    record = await store.job("b")
    assert record is not None
    assert (record.status, record.tries, record.waiting) == (JobStatus.SENT, 0, "rate")
    assert (await store.counts(T0)).scheduled == 2


async def test_a_put_off_retry_stays_retry_with_its_earlier_tries(store: JobStore) -> None:
    one = JobLimits(concurrency=1)
    await store.prepare()
    await store.enqueue([new("a"), new("b")])
    a, b = await started(store, "e1", 2)
    assert await store.admit("e1", a, one, T0, WAIT) is None
    retry = Outcome("retry", b.ticket, "b", T0, error=BOOM, due=T0)
    assert await store.finish("e1", [retry], TTL) == []
    assert await store.promote_due(T0, 10) == 1
    [b2] = await store.take("e1", 1, 0, ManualClock(T0))
    assert b2.tries == 2
    assert isinstance(await store.admit("e1", b2, one, T0, WAIT), Deferral)
    record = await store.job("b")
    assert record is not None
    assert (record.status, record.tries, record.waiting) == (JobStatus.RETRY, 1, "concurrency")


async def test_limits_hold_in_a_named_queue(store: JobStore) -> None:
    one = JobLimits(concurrency=1)
    await store.prepare(["default", "emails"])
    jobs = [NewJob(i, "mail", b'{"args":[]}', "json", 1, True, T0, queue="emails") for i in "xyz"]
    await store.enqueue(jobs)
    await store.beat("e1", {}, TTL)
    x, y, z = await store.take("e1", 3, 0, ManualClock(T0), [("emails", 3)])
    assert await store.admit("e1", x, one, T0, WAIT) is None
    assert isinstance(await store.admit("e1", y, one, T0, WAIT), Deferral)
    counts = await store.counts(T0)
    assert counts.queues["emails"].scheduled == 1
    assert await store.finish("e1", [Outcome("success", x.ticket, "x", T0, slot="mail")], TTL) == []
    assert await store.admit("e1", z, one, T0, WAIT) is None
    assert await store.cancel("z", T0, TTL) == JobStatus.EXECUTING
    assert await store.promote_due(T0 + WAIT, 10) == 1
    [y2] = await store.take("e1", 1, 0, ManualClock(T0 + WAIT), [("emails", 1)])
    assert await store.admit("e1", y2, one, T0, WAIT) is None
