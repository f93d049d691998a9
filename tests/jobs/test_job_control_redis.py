"""Cancelling jobs that an older client enqueued on Redis: its enqueue script did not name
the job's queue entry, so the cancel finds a running job's entry by what the take script
recorded, and a queued job's entry is dropped by the next take instead of running."""

from __future__ import annotations

import redis

from runnel.jobs import JobStatus, ManualClock
from runnel.jobs.model import Outcome
from runnel.store import JobStore
from runnel_redis.layout import layout_for
from tests.support.job_hashes import T0, write_job

TTL = 60.0


def enqueue_as_before(client: redis.Redis, redis_url: str, app: str, job_id: str) -> None:
    """What job_enqueue.lua stored before jobs named their entry: the hash and the entry."""
    write_job(client, redis_url, app, job_id, retries=2, names_entry=False)


async def test_a_running_job_enqueued_without_its_entry_is_cancelled_once(
    redis_job_store: JobStore, redis_client: redis.Redis, redis_url: str, app_name: str
) -> None:
    await redis_job_store.prepare()
    enqueue_as_before(redis_client, redis_url, app_name, "old")
    [d] = await redis_job_store.take("e1", 1, 0, ManualClock(T0))
    assert await redis_job_store.cancel("old", T0 + 1, TTL) == JobStatus.EXECUTING
    assert await redis_job_store.cancelled("e1", 0) == ["old"]
    done = Outcome("success", d.ticket, d.id, T0 + 2, result=b"v1")
    assert await redis_job_store.finish("e1", [done], TTL) == ["old"]
    assert await redis_job_store.status("old") == JobStatus.CANCELLED
    assert await redis_job_store.abandoned("e1", 10) == []


async def test_a_queued_job_enqueued_without_its_entry_never_runs(
    redis_job_store: JobStore, redis_client: redis.Redis, redis_url: str, app_name: str
) -> None:
    await redis_job_store.prepare()
    enqueue_as_before(redis_client, redis_url, app_name, "old")
    enqueue_as_before(redis_client, redis_url, app_name, "next")
    assert await redis_job_store.cancel("old", T0, TTL) == JobStatus.SENT
    assert [d.id for d in await redis_job_store.take("e1", 5, 0, ManualClock(T0))] == ["next"]
    assert redis_client.xlen(layout_for(redis_url).job_queue(app_name)) == 1  # "next" only
    assert await redis_job_store.status("old") == JobStatus.CANCELLED
