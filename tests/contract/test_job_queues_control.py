"""JobStore: cancels and periodic ticks with named queues, on every store.

A cancel must find a job in its own queue, whichever call last put it on that queue's
stream (an enqueue, a promotion, a release, recovery, a replay, a periodic tick): the
job is never taken and its entry is gone, so the queue's count drops at once. A running
job taken through a plan is cancelled as one of the default queue is. A periodic job's
tick goes to the queue its job names (docs/jobs.md, "Queues and priorities", "Cancelling
a job" and "Periodic jobs").
"""

from __future__ import annotations

import pytest

from runnel.jobs import JobStatus, Progress
from runnel.jobs.model import NewJob, Outcome
from runnel.jobs.queues import DEFAULT_QUEUE
from runnel.store import Backend, JobStore
from tests.contract.test_job_queues import BOOM, CLOCK, T0, TTL, new

EMAILS = [("emails", 5)]
BOTH = [("emails", 5), (DEFAULT_QUEUE, 5)]


@pytest.fixture
def store(backend: Backend, app: str) -> JobStore:
    return backend.job_store(app)


async def queued(store: JobStore, queue: str) -> int:
    """The entries waiting in ``queue`` (its stream's entries less those taken)."""
    return (await store.counts(T0)).queues[queue].queued


def tick(job_id: str, queue: str) -> NewJob:
    return NewJob(job_id, "digest", b'{"args":[]}', "json", 0, True, T0, queue=queue)


async def test_a_queued_job_of_a_named_queue_cancelled_is_gone_from_its_queue(
    store: JobStore,
) -> None:
    await store.prepare([DEFAULT_QUEUE, "emails"])
    await store.enqueue([new("m1", "emails"), new("m2", "emails"), new("d1")])
    assert await store.cancel("m1", T0 + 1, TTL) == JobStatus.SENT
    counts = await store.counts(T0 + 1)
    assert (counts.queues["emails"].queued, counts.queued, counts.cancelled) == (1, 2, 1)
    assert [d.id for d in await store.take("e1", 5, 0, CLOCK, BOTH)] == ["m2", "d1"]
    record = await store.job("m1")
    assert record is not None
    assert (record.status, record.queue, record.tries) == (JobStatus.CANCELLED, "emails", 0)


async def test_a_scheduled_job_of_a_named_queue_cancelled_is_never_due(store: JobStore) -> None:
    await store.prepare([DEFAULT_QUEUE, "emails"])
    await store.enqueue([new("later", "emails", due=T0 + 10)])
    assert await store.cancel("later", T0, TTL) == JobStatus.SENT
    counts = await store.counts(T0)
    assert (counts.queues["emails"].scheduled, counts.next_due) == (0, None)
    assert await store.promote_due(T0 + 10, 10) == 0
    assert await store.take("e1", 5, 0, CLOCK, BOTH) == []


async def test_a_running_job_taken_through_a_plan_cancelled(store: JobStore) -> None:
    """Its executor is told once, its outcome is refused, nothing is left held in its
    queue, and the other job of the same take ends as it would have."""
    await store.prepare([DEFAULT_QUEUE, "emails"])
    await store.enqueue([new("m", "emails"), new("d")])
    await store.beat("e1", {"pid": 1}, 30)
    taken = await store.take("e1", 2, 0, CLOCK, [("emails", 1), (DEFAULT_QUEUE, 1)])
    assert [(d.id, d.queue) for d in taken] == [("m", "emails"), ("d", DEFAULT_QUEUE)]
    assert await store.report_progress("e1", "m", Progress(0.5, "half", T0, 1))
    assert await store.cancel("m", T0 + 1, TTL) == JobStatus.EXECUTING
    assert await store.cancelled("e1", 0) == ["m"]
    assert await store.cancelled("e1", 0) == []
    done = [Outcome("success", d.ticket, d.id, T0 + 2, result=b"v1") for d in taken]
    assert await store.finish("e1", done, TTL) == ["m"]
    record = await store.job("m")
    assert record is not None
    assert (record.status, record.queue) == (JobStatus.CANCELLED, "emails")
    assert record.progress == Progress(0.5, "half", T0, 1)
    assert await store.status("d") == JobStatus.SUCCESS
    emails = (await store.counts(T0 + 2)).queues["emails"]
    assert (emails.queued, emails.executing) == (0, 0)
    assert await store.abandoned("e1", 10) == []
    assert await store.take("e1", 5, 0, CLOCK, BOTH) == []


async def test_a_job_back_on_its_named_queue_is_cancelled_by_its_new_entry(
    store: JobStore,
) -> None:
    """Each call that puts a job of a named queue back on its stream names the new entry
    in the job: a promotion after a retry, a release, recovery of a dead executor's job,
    a replay. A cancel then deletes that entry."""
    await store.prepare([DEFAULT_QUEUE, "emails"])
    await store.enqueue([new(n, "emails") for n in ("retried", "released", "lost", "replayed")])
    await store.beat("e1", {"pid": 1}, 30)
    retried, released, _, replayed = await store.take("e1", 4, 0, CLOCK, EMAILS)
    await store.finish(
        "e1",
        [
            Outcome("retry", retried.ticket, retried.id, T0, error=BOOM, due=T0 + 5),
            Outcome("release", released.ticket, released.id, T0, uncount=True),
            Outcome("dead", replayed.ticket, replayed.id, T0, error=BOOM),
        ],
        TTL,
    )
    assert await store.promote_due(T0 + 5, 10) == 1
    assert await store.replay(await store.dead_letters(), T0 + 6) == 1
    # e1 stops beating: its held job is put back as recovery does, only if it is dead.
    await store.leave("e1")
    [held] = await store.abandoned("e1", 10)
    assert held.id == "lost"
    back = Outcome("release", held.ticket, held.id, T0 + 7, uncount=True)
    assert await store.finish("e1", [back], TTL, only_if_dead=True) == []
    assert await queued(store, "emails") == 4
    for job_id, was in [
        ("retried", JobStatus.RETRY),
        ("released", JobStatus.SENT),
        ("lost", JobStatus.SENT),
        ("replayed", JobStatus.SENT),
    ]:
        assert await store.cancel(job_id, T0 + 8, TTL) == was
    assert await queued(store, "emails") == 0
    assert await store.take("e2", 5, 0, CLOCK, BOTH) == []


async def test_a_periodic_jobs_tick_goes_to_the_queue_its_job_names(store: JobStore) -> None:
    """Settled before any worker took that queue: the tick's job waits there (counted
    there), a take without it never sees it, and one that names it does."""
    assert await store.settle_ticks("digest", None, T0, [tick("digest@0", "reports")]) == (
        True,
        T0,
    )
    assert await store.settle_ticks("digest", T0, T0 + 1, [tick("digest@1", "reports")]) == (
        True,
        T0 + 1,
    )
    counts = await store.counts(T0)
    assert (counts.queues["reports"].queued, counts.queues[DEFAULT_QUEUE].queued) == (2, 0)
    record = await store.job("digest@0")
    assert record is not None
    assert (record.status, record.queue) == (JobStatus.SENT, "reports")
    await store.prepare([DEFAULT_QUEUE, "reports"])
    assert await store.take("e1", 5, 0, CLOCK) == []
    assert await store.take("e1", 5, 0, CLOCK, [(DEFAULT_QUEUE, 5)]) == []
    taken = await store.take("e1", 5, 0, CLOCK, [("reports", 5)])
    assert [(d.id, d.queue, d.name) for d in taken] == [
        ("digest@0", "reports", "digest"),
        ("digest@1", "reports", "digest"),
    ]


async def test_a_periodic_jobs_tick_in_a_named_queue_cancelled_is_never_taken(
    store: JobStore,
) -> None:
    await store.prepare([DEFAULT_QUEUE, "reports"])
    ticks = [tick("digest@0", "reports"), tick("digest@1", "reports")]
    assert await store.settle_ticks("digest", None, T0, ticks) == (True, T0)
    assert await store.cancel("digest@0", T0 + 1, TTL) == JobStatus.SENT
    assert await queued(store, "reports") == 1
    taken = await store.take("e1", 5, 0, CLOCK, [("reports", 5)])
    assert [d.id for d in taken] == ["digest@1"]
