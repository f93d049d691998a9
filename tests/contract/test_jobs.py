"""JobStore: the job queue's state, driven call by call; every store must answer every
call as the others do (docs/plugins.md, "A store for jobs", lists the properties)."""

from __future__ import annotations

import asyncio

import pytest

from runnel.jobs import JobStatus, ManualClock
from runnel.jobs.codec import error_item
from runnel.jobs.model import ErrorInfo, JobTotals, NewJob, Outcome
from runnel.store import Backend, JobStore
from runnel.store.identity import Producer
from tests.contract.support import RealTime

T0 = 1_700_000_000.0
TTL = 60.0
BOOM = ErrorInfo("ValueError", "boom", "Traceback...")


@pytest.fixture
def store(backend: Backend, app: str) -> JobStore:
    return backend.job_store(app)


def new(job_id: str, due: float | None = None, retries: int = 2) -> NewJob:
    return NewJob(job_id, "add", b'{"args":[1]}', "json", retries, True, T0, due)


async def test_enqueue_is_idempotent_and_take_counts_the_try(store: JobStore) -> None:
    await store.prepare()
    assert await store.enqueue([new("a"), new("b"), new("a")]) == [True, True, False]
    assert await store.status("a") == JobStatus.SENT
    taken = await store.take("e1", 5, 0, ManualClock(T0 + 1))
    assert [(d.id, d.tries, d.name, d.payload) for d in taken] == [
        ("a", 1, "add", b'{"args":[1]}'),
        ("b", 1, "add", b'{"args":[1]}'),
    ]
    record = await store.job("a")
    assert record is not None
    assert (record.status, record.started, record.executor) == (JobStatus.EXECUTING, T0 + 1, "e1")
    counts = await store.counts(T0)
    assert (counts.queued, counts.executing) == (0, 2)
    # A second enqueue of a running job leaves it alone.
    assert await store.enqueue([new("a")]) == [False]
    assert await store.take("e2", 5, 0, ManualClock(T0)) == []


async def test_success_keeps_the_result_and_refuses_a_second_outcome(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a")])
    [d] = await store.take("e1", 1, 0, ManualClock(T0))
    done = Outcome("success", d.ticket, d.id, T0 + 2, result=b"v42")
    assert await store.finish("e1", [done], TTL) == []
    assert await store.finish("e1", [done], TTL) == ["a"]
    assert await store.wait_result("a", 0.01) == b"v42"
    record = await store.job("a")
    assert record is not None
    assert (record.status, record.finished, record.result) == (JobStatus.SUCCESS, T0 + 2, b"v42")
    counts = await store.counts(T0 + 2)
    assert (counts.queued, counts.executing, counts.results) == (0, 0, 1)
    assert (await store.counts(T0 + 2 + TTL)).results == 0


async def test_retry_schedules_and_promote_moves_it_back(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a")])
    clock = ManualClock(T0)
    [d] = await store.take("e1", 1, 0, clock)
    retry = Outcome("retry", d.ticket, d.id, T0, error=BOOM, due=T0 + 5)
    assert await store.finish("e1", [retry], TTL) == []
    record = await store.job("a")
    assert record is not None
    assert (record.status, record.due, record.error) == (JobStatus.RETRY, T0 + 5, BOOM)
    counts = await store.counts(T0)
    assert (counts.scheduled, counts.next_due) == (1, T0 + 5)
    assert await store.promote_due(T0 + 4.999, 10) == 0
    assert await store.promote_due(T0 + 5, 10) == 1
    [again] = await store.take("e1", 1, 0, clock)
    assert (again.id, again.tries) == ("a", 2)


async def test_countdown_waits_on_the_schedule(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("later", due=T0 + 10), new("first", due=T0 + 3)])
    assert await store.take("e1", 5, 0, ManualClock(T0)) == []
    assert (await store.counts(T0)).next_due == T0 + 3
    assert await store.promote_due(T0 + 10, 1) == 1
    [d] = await store.take("e1", 5, 0, ManualClock(T0))
    assert d.id == "first"


async def test_dead_letters_replay_and_purge(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a"), new("b")])
    taken = await store.take("e1", 2, 0, ManualClock(T0))
    outcomes = [
        Outcome("dead", d.ticket, d.id, T0 + i, result=error_item(BOOM), error=BOOM)
        for i, d in enumerate(taken)
    ]
    assert await store.finish("e1", outcomes, TTL) == []
    letters = await store.dead_letters()
    assert [(x.id, x.name, x.error, x.at) for x in letters] == [
        ("a", "add", "ValueError: boom", T0),
        ("b", "add", "ValueError: boom", T0 + 1),
    ]
    assert [x.id for x in await store.dead_letters(limit=1)] == ["a"]
    assert await store.wait_result("a", 0.01) == error_item(BOOM)
    assert (await store.counts(T0)).dead == 2
    assert await store.replay(letters[:1], T0 + 9) == 1
    assert await store.replay(letters[:1], T0 + 9) == 0
    assert await store.purge(letters) == 1
    assert await store.status("a") == JobStatus.SENT
    assert await store.status("b") == JobStatus.UNKNOWN
    record = await store.job("a")
    assert record is not None
    assert (record.tries, record.error, record.result) == (0, None, None)
    [d] = await store.take("e1", 5, 0, ManualClock(T0))
    assert (d.id, d.tries) == ("a", 1)


async def test_totals_count_the_tries_recorded_and_only_grow(store: JobStore) -> None:
    """The counts the dashboard's job rates come from: each outcome recorded counts once,
    in the same step; a refused one, a release, a replay or a purge changes nothing."""
    await store.prepare()
    assert (await store.counts(T0)).totals == JobTotals(0, 0, 0)
    await store.enqueue([new(i) for i in "abcde"])
    a, b, c, d, e = await store.take("e1", 5, 0, ManualClock(T0))
    outcomes = [
        Outcome("success", a.ticket, a.id, T0),
        Outcome("success", b.ticket, b.id, T0, result=b"v"),
        Outcome("retry", c.ticket, c.id, T0, error=BOOM, due=T0 + 5),
        Outcome("dead", d.ticket, d.id, T0, error=BOOM),
        Outcome("release", e.ticket, e.id, T0, uncount=True),
    ]
    assert await store.finish("e1", outcomes, TTL) == []
    assert (await store.counts(T0)).totals == JobTotals(succeeded=2, retried=1, dead=1)
    assert await store.finish("e1", outcomes[:1], TTL) == ["a"]  # refused: not counted
    letters = await store.dead_letters()
    assert await store.replay(letters, T0) == 1
    counts = await store.counts(T0)
    assert counts.totals == JobTotals(succeeded=2, retried=1, dead=1)
    assert all(q.totals == JobTotals() for q in counts.queues.values())  # kept per app


async def test_release_uncounted_goes_back_as_it_was(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a")])
    [d] = await store.take("e1", 1, 0, ManualClock(T0))
    back = Outcome("release", d.ticket, d.id, T0, uncount=True)
    assert await store.finish("e1", [back], TTL) == []
    record = await store.job("a")
    assert record is not None
    assert (record.status, record.tries, record.executor) == (JobStatus.SENT, 0, None)
    [d] = await store.take("e2", 1, 0, ManualClock(T0))
    assert d.tries == 1


async def test_abandoned_recovery_is_fenced_by_the_heartbeat(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a"), new("b")])
    await store.beat("e1", {"pid": 1}, 30)
    taken = await store.take("e1", 2, 0, ManualClock(T0))
    assert [e.id for e in await store.executors()] == ["e1"]
    assert (await store.executors())[0].alive
    lost = await store.abandoned("e1", 10)
    assert [(a.id, a.status, a.started, a.tries) for a in lost] == [
        ("a", JobStatus.EXECUTING, True, 1),
        ("b", JobStatus.EXECUTING, True, 1),
    ]
    assert [a.ticket for a in lost] == [d.ticket for d in taken]
    retry = [Outcome("retry", a.ticket, a.id, T0, error=BOOM, due=T0) for a in lost]
    # Alive: recovery is refused whole, and the executor is not forgotten.
    assert await store.finish("e1", retry, TTL, only_if_dead=True) == ["a", "b"]
    assert not await store.forget("e1")
    # Gone (it left without finishing): recovery applies, then it can be forgotten.
    await store.leave("e1")
    [state] = await store.executors()
    assert (state.id, state.alive, state.info) == ("e1", False, {"pid": 1})
    assert await store.finish("e1", retry[:1], TTL, only_if_dead=True) == []
    assert not await store.forget("e1")  # still holds b
    assert await store.finish("e1", retry[1:], TTL, only_if_dead=True) == []
    # The paused executor's late outcome is refused: the delivery was taken back.
    late = Outcome("success", taken[0].ticket, "a", T0, result=b"v1")
    assert await store.finish("e1", [late], TTL) == ["a"]
    assert await store.abandoned("e1", 10) == []
    assert await store.forget("e1")
    assert await store.executors() == []


async def test_leave_forgets_an_executor_holding_nothing(store: JobStore) -> None:
    await store.prepare()
    await store.beat("e1", {"pid": 1}, 30)
    await store.leave("e1")
    assert await store.executors() == []


async def test_a_job_purged_while_queued_is_skipped(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a")])
    [d] = await store.take("e1", 1, 0, ManualClock(T0))
    dead = Outcome("dead", d.ticket, d.id, T0, error=BOOM)
    await store.finish("e1", [dead], TTL)
    letters = await store.dead_letters()
    await store.replay(letters, T0)
    await store.purge(await store.dead_letters())  # nothing: the letter was replayed
    assert await store.status("a") == JobStatus.SENT


async def test_take_blocks_until_a_job_arrives(store: JobStore) -> None:
    await store.prepare()
    taker = asyncio.create_task(store.take("e1", 1, 5000, ManualClock(T0)))
    await asyncio.sleep(0.05)
    assert not taker.done()
    await store.enqueue([new("a")])
    [d] = await asyncio.wait_for(taker, 10)
    assert d.id == "a"
    assert await store.take("e1", 1, 10, ManualClock(T0)) == []


async def test_wait_result_blocks_until_the_result(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a")])
    waiter = asyncio.create_task(store.wait_result("a", 5))
    assert await store.wait_result("a", 0.01) is None
    [d] = await store.take("e1", 1, 0, ManualClock(T0))
    await store.finish("e1", [Outcome("success", d.ticket, d.id, T0, result=b"v1")], TTL)
    assert await asyncio.wait_for(waiter, 10) == b"v1"


async def test_an_executor_that_stops_beating_is_presumed_dead(store: JobStore) -> None:
    """Heartbeats expire by the store's own clock: let real time pass."""
    await store.prepare()
    await store.enqueue([new("a")])
    await store.beat("e1", {"pid": 1}, 0.3)
    [d] = await store.take("e1", 1, 0, ManualClock(T0))
    retry = Outcome("retry", d.ticket, d.id, T0, error=BOOM, due=T0)
    assert await store.finish("e1", [retry], TTL, only_if_dead=True) == ["a"]

    async def dead() -> bool:
        return [(e.id, e.alive) for e in await store.executors()] == [("e1", False)]

    await RealTime().until(dead, "e1's heartbeat expired")
    assert [a.id for a in await store.abandoned("e1", 10)] == ["a"]
    assert await store.finish("e1", [retry], TTL, only_if_dead=True) == []
    assert await store.status("a") == JobStatus.RETRY
    assert await store.forget("e1")


def tick_job(job_id: str) -> NewJob:
    return NewJob(job_id, "beat", b'{"args":[]}', "json", 0, True, T0 + 1)


async def test_settling_a_tick_is_a_compare_and_set(store: JobStore) -> None:
    """A periodic job's last tick moves only from the value the caller read, together with
    the jobs of the ticks that run; a refused call changes nothing."""
    await store.prepare()
    assert await store.last_ticks(["beat", "other"]) == {"beat": None, "other": None}
    assert await store.settle_ticks("beat", None, T0, []) == (True, T0)
    assert await store.settle_ticks("beat", None, T0, []) == (False, T0)
    # Read long ago: refused, nothing enqueued.
    assert await store.settle_ticks("beat", T0 - 60, T0 + 60, [tick_job("x")]) == (False, T0)
    assert await store.status("x") == JobStatus.UNKNOWN
    # Two ticks' jobs in one step; an id that exists is left alone.
    await store.enqueue([new("beat@2")])
    jobs = [tick_job("beat@1"), tick_job("beat@2")]
    assert await store.settle_ticks("beat", T0, T0 + 120, jobs) == (True, T0 + 120)
    assert await store.last_ticks(["beat", "other"]) == {"beat": T0 + 120, "other": None}
    taken = await store.take("e1", 5, 0, ManualClock(T0 + 2))
    assert [(d.id, d.name, d.payload) for d in taken] == [
        ("beat@2", "add", b'{"args":[1]}'),
        ("beat@1", "beat", b'{"args":[]}'),
    ]
    record = await store.job("beat@1")
    assert record is not None
    assert (record.created, record.retries, record.results) == (T0 + 1, 0, True)


async def test_workers_racing_for_a_tick_enqueue_it_once(store: JobStore) -> None:
    await store.prepare()
    calls = [store.settle_ticks("beat", None, T0, [tick_job("beat@0")]) for _ in range(8)]
    outcomes = await asyncio.gather(*calls)
    assert sorted(outcomes) == [(False, T0)] * 7 + [(True, T0)]
    assert [d.id for d in await store.take("e1", 10, 0, ManualClock(T0))] == ["beat@0"]


async def test_an_enqueue_sent_again_under_its_call_is_answered_as_the_first_time(
    store: JobStore,
) -> None:
    """What a lost reply's retry relies on: the same call (identity) again finds the jobs
    it stored and answers True for them, storing and queueing nothing twice; a job stored
    before by another call, or by a call without identity, is still False."""
    await store.prepare()
    assert store.identities
    assert await store.enqueue([new("before")]) == [True]
    producer = Producer()
    call = producer.call()
    jobs = [new("a"), new("later", due=T0 + 60), new("before")]
    assert await store.enqueue(jobs, call=call) == [True, True, False]
    assert await store.enqueue(jobs, call=call.retried()) == [True, True, False]
    assert await store.enqueue([new("a")], call=producer.call()) == [False]
    assert await store.enqueue([new("a")]) == [False]
    taken = await store.take("e1", 10, 0, ManualClock(T0))
    assert sorted(d.id for d in taken) == ["a", "before"]  # each queued once
    assert await store.scheduled_jobs(10) == [("later", T0 + 60)]
