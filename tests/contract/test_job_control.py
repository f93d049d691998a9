"""JobStore: cancelling jobs and keeping their progress, call by call, on every store.

A cancel is one atomic step against the worker's own outcome: whichever is recorded first
wins, and the other is refused or changes nothing. A running job's executor is told once.
"""

from __future__ import annotations

import asyncio

import pytest

from runnel.jobs import JobStatus, ManualClock, Progress
from runnel.jobs.codec import CANCELLED, error_item
from runnel.jobs.model import NewJob, Outcome
from runnel.store import Backend, JobStore
from tests.contract.support import HANG_GUARD
from tests.contract.test_jobs import BOOM, T0, TTL, new


@pytest.fixture
def store(backend: Backend, app: str) -> JobStore:
    return backend.job_store(app)


async def test_a_queued_job_cancelled_is_never_taken(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a"), new("b")])
    assert await store.cancel("a", T0 + 1, TTL) == JobStatus.SENT
    record = await store.job("a")
    assert record is not None
    assert (record.status, record.finished, record.result) == (
        JobStatus.CANCELLED,
        T0 + 1,
        CANCELLED,
    )
    assert await store.wait_result("a", 0.01) == CANCELLED
    counts = await store.counts(T0 + 1)
    assert (counts.queued, counts.cancelled) == (1, 1)
    assert [d.id for d in await store.take("e1", 5, 0, ManualClock(T0))] == ["b"]
    assert (await store.counts(T0 + 1 + TTL)).cancelled == 0  # kept for results_ttl


async def test_a_scheduled_job_cancelled_is_never_due(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("later", due=T0 + 10)])
    assert await store.cancel("later", T0, TTL) == JobStatus.SENT
    counts = await store.counts(T0)
    assert (counts.scheduled, counts.next_due, counts.cancelled) == (0, None, 1)
    assert await store.promote_due(T0 + 10, 10) == 0
    assert await store.take("e1", 5, 0, ManualClock(T0 + 10)) == []
    record = await store.job("later")
    assert record is not None
    assert (record.status, record.due) == (JobStatus.CANCELLED, None)


async def test_a_job_waiting_for_its_retry_cancelled_stays_cancelled(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a")])
    [d] = await store.take("e1", 1, 0, ManualClock(T0))
    retry = Outcome("retry", d.ticket, d.id, T0, error=BOOM, due=T0 + 5)
    assert await store.finish("e1", [retry], TTL) == []
    assert await store.cancel("a", T0 + 1, TTL) == JobStatus.RETRY
    assert await store.promote_due(T0 + 5, 10) == 0
    assert await store.take("e1", 5, 0, ManualClock(T0 + 5)) == []
    assert await store.status("a") == JobStatus.CANCELLED


async def test_a_running_job_cancelled_refuses_its_outcome_and_tells_its_executor(
    store: JobStore,
) -> None:
    await store.prepare()
    await store.enqueue([new("a"), new("b")])
    await store.beat("e1", {"pid": 1}, 30)
    taken = await store.take("e1", 2, 0, ManualClock(T0))
    assert await store.cancelled("e1", 0) == []
    assert await store.cancel("a", T0 + 1, TTL) == JobStatus.EXECUTING
    assert await store.cancelled("e2", 0) == []
    assert await store.cancelled("e1", 0) == ["a"]
    assert await store.cancelled("e1", 0) == []  # told once
    # The worker's own outcome comes too late: refused, the job stays CANCELLED.
    done = [Outcome("success", d.ticket, d.id, T0 + 2, result=b"v1") for d in taken]
    assert await store.finish("e1", done, TTL) == ["a"]
    assert await store.status("a") == JobStatus.CANCELLED
    assert await store.wait_result("a", 0.01) == CANCELLED
    assert await store.status("b") == JobStatus.SUCCESS
    # Nothing is left held in e1's name, so nothing is recovered or retried.
    assert await store.abandoned("e1", 10) == []
    assert (await store.counts(T0 + 2)).executing == 0


async def test_an_outcome_recorded_first_wins_over_the_cancel(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a")])
    [d] = await store.take("e1", 1, 0, ManualClock(T0))
    done = Outcome("success", d.ticket, d.id, T0, result=b"v1")
    assert await store.finish("e1", [done], TTL) == []
    assert await store.cancel("a", T0 + 1, TTL) == JobStatus.SUCCESS
    record = await store.job("a")
    assert record is not None
    assert (record.status, record.result) == (JobStatus.SUCCESS, b"v1")
    assert await store.cancelled("e1", 0) == []
    assert (await store.counts(T0 + 1)).cancelled == 0


async def test_ended_and_unknown_jobs_are_left_as_they_are(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("dead"), new("twice")])
    [d] = await store.take("e1", 1, 0, ManualClock(T0))
    buried = Outcome("dead", d.ticket, d.id, T0, result=error_item(BOOM), error=BOOM)
    assert await store.finish("e1", [buried], TTL) == []
    assert await store.cancel("dead", T0, TTL) == JobStatus.DEAD
    assert await store.status("dead") == JobStatus.DEAD
    assert len(await store.dead_letters()) == 1
    assert await store.cancel("twice", T0, TTL) == JobStatus.SENT
    assert await store.cancel("twice", T0 + 1, TTL) == JobStatus.CANCELLED
    record = await store.job("twice")
    assert record is not None and record.finished == T0  # the first cancel's time
    assert await store.cancel("nobody", T0, TTL) == JobStatus.UNKNOWN
    assert await store.status("nobody") == JobStatus.UNKNOWN
    # A cancelled id stays taken: enqueuing it again enqueues nothing.
    assert await store.enqueue([new("twice")]) == [False]


async def test_a_job_without_results_keeps_no_result_when_cancelled(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([NewJob("quiet", "add", b'{"args":[]}', "json", 0, False, T0)])
    assert await store.cancel("quiet", T0, TTL) == JobStatus.SENT
    record = await store.job("quiet")
    assert record is not None
    assert (record.status, record.result) == (JobStatus.CANCELLED, None)


async def test_waiting_for_cancels_wakes_when_one_comes(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a")])
    await store.take("e1", 1, 0, ManualClock(T0))
    waiting = asyncio.create_task(store.cancelled("e1", HANG_GUARD))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    assert await store.cancel("a", T0, TTL) == JobStatus.EXECUTING
    assert await asyncio.wait_for(waiting, HANG_GUARD + 5) == ["a"]


async def test_an_executor_forgotten_drops_the_cancels_it_did_not_read(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a")])
    await store.beat("e1", {"pid": 1}, 30)
    await store.take("e1", 1, 0, ManualClock(T0))
    assert await store.cancel("a", T0, TTL) == JobStatus.EXECUTING
    await store.leave("e1")  # it holds nothing any more: forgotten at once
    assert await store.executors() == []
    assert await store.cancelled("e1", 0) == []


async def test_progress_is_kept_only_from_the_try_running(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a"), new("b")])
    half = Progress(0.5, "resizing", T0 + 1, 1)
    assert not await store.report_progress("e1", "a", half)  # queued: not running yet
    taken = await store.take("e1", 2, 0, ManualClock(T0))
    assert await store.report_progress("e1", "a", half)
    assert not await store.report_progress("e2", "a", half)  # another executor
    assert not await store.report_progress("e1", "a", Progress(0.9, "", T0 + 2, 2))
    record = await store.job("a")
    assert record is not None and record.progress == half
    assert (await store.job("b")).progress is None  # type: ignore[union-attr]
    # Ended or cancelled: what was reported stays, nothing more is kept.
    done = Outcome("success", taken[0].ticket, "a", T0 + 3, result=b"v1")
    assert await store.finish("e1", [done], TTL) == []
    assert not await store.report_progress("e1", "a", Progress(1.0, "done", T0 + 3, 1))
    assert await store.report_progress("e1", "b", Progress(0.25, "b", T0 + 1, 1))
    assert await store.cancel("b", T0 + 2, TTL) == JobStatus.EXECUTING
    assert not await store.report_progress("e1", "b", Progress(0.75, "b", T0 + 3, 1))
    assert (await store.job("a")).progress == half  # type: ignore[union-attr]
    assert (await store.job("b")).progress == Progress(0.25, "b", T0 + 1, 1)  # type: ignore[union-attr]
    # A job that is gone is not brought back by a report.
    assert not await store.report_progress("e1", "nobody", half)
    assert await store.status("nobody") == JobStatus.UNKNOWN


async def test_a_replayed_job_starts_without_progress(store: JobStore) -> None:
    await store.prepare()
    await store.enqueue([new("a")])
    [d] = await store.take("e1", 1, 0, ManualClock(T0))
    assert await store.report_progress("e1", "a", Progress(0.5, "half", T0, 1))
    buried = Outcome("dead", d.ticket, d.id, T0, error=BOOM)
    assert await store.finish("e1", [buried], TTL) == []
    assert await store.replay(await store.dead_letters(), T0 + 1) == 1
    record = await store.job("a")
    assert record is not None and record.progress is None
    # And, queued again, it can be cancelled by its new entry.
    assert await store.cancel("a", T0 + 2, TTL) == JobStatus.SENT
    assert await store.take("e1", 1, 0, ManualClock(T0)) == []


async def test_a_periodic_jobs_tick_cancelled_while_queued_is_never_taken(
    store: JobStore,
) -> None:
    """A tick's job is enqueued by the periodic scheduler's own step: cancelling it finds
    its queue entry as it finds any job's."""
    from tests.contract.test_jobs import tick_job

    await store.prepare()
    assert await store.settle_ticks("beat", None, T0, [tick_job("beat@0")]) == (True, T0)
    assert await store.cancel("beat@0", T0 + 1, TTL) == JobStatus.SENT
    assert await store.take("e1", 5, 0, ManualClock(T0 + 1)) == []
    assert (await store.counts(T0 + 1)).queued == 0
