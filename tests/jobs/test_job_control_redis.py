"""Cancelling jobs that an older client enqueued on Redis: its enqueue script did not name
the job's queue entry, so the cancel finds a running job's entry by what the take script
recorded, and a queued job's entry is dropped by the next take instead of running."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis

from runnel.jobs import JobStatus, ManualClock
from runnel.jobs.model import Outcome
from runnel.settings import Settings
from runnel.store import JobStore, backend_for
from runnel_redis.layout import layout_for

T0 = 1_700_000_000.0
TTL = 60.0


@pytest.fixture
async def store(redis_url: str, app_name: str) -> AsyncIterator[JobStore]:
    backend = backend_for(redis_url, Settings())
    yield backend.job_store(app_name)
    await backend.aclose()


def enqueue_as_before(client: redis.Redis, redis_url: str, app: str, job_id: str) -> None:
    """What job_enqueue.lua stored before jobs named their entry: the hash and the entry."""
    layout = layout_for(redis_url)
    client.hset(
        layout.job(app, job_id),
        mapping={
            "name": "add",
            "status": "SENT",
            "payload": b'{"args":[1]}',
            "codec": "json",
            "retries": 2,
            "results": 1,
            "tries": 0,
            "created": int(T0 * 1000),
        },
    )
    client.xadd(layout.job_queue(app), {"id": job_id})


async def test_a_running_job_enqueued_without_its_entry_is_cancelled_once(
    store: JobStore, redis_client: redis.Redis, redis_url: str, app_name: str
) -> None:
    await store.prepare()
    enqueue_as_before(redis_client, redis_url, app_name, "old")
    [d] = await store.take("e1", 1, 0, ManualClock(T0))
    assert await store.cancel("old", T0 + 1, TTL) == JobStatus.EXECUTING
    assert await store.cancelled("e1", 0) == ["old"]
    done = Outcome("success", d.ticket, d.id, T0 + 2, result=b"v1")
    assert await store.finish("e1", [done], TTL) == ["old"]
    assert await store.status("old") == JobStatus.CANCELLED
    assert await store.abandoned("e1", 10) == []


async def test_a_queued_job_enqueued_without_its_entry_never_runs(
    store: JobStore, redis_client: redis.Redis, redis_url: str, app_name: str
) -> None:
    await store.prepare()
    enqueue_as_before(redis_client, redis_url, app_name, "old")
    enqueue_as_before(redis_client, redis_url, app_name, "next")
    assert await store.cancel("old", T0, TTL) == JobStatus.SENT
    assert [d.id for d in await store.take("e1", 5, 0, ManualClock(T0))] == ["next"]
    assert redis_client.xlen(layout_for(redis_url).job_queue(app_name)) == 1  # "next" only
    assert await store.status("old") == JobStatus.CANCELLED
