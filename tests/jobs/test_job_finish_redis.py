"""Recording outcomes on Redis (job_finish.lua) for jobs outside any workflow: one read
of the job's hash answers both whether it still exists and whether it is a workflow's,
so such a job pays no workflow lookups."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis

from runnel.jobs import ErrorInfo, JobStatus, ManualClock
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


def enqueue(client: redis.Redis, redis_url: str, app: str, job_id: str) -> None:
    layout = layout_for(redis_url)
    client.hset(
        layout.job(app, job_id),
        mapping={
            "name": "add",
            "status": "SENT",
            "payload": b'{"args":[1]}',
            "codec": "json",
            "retries": 0,
            "results": 1,
            "tries": 0,
            "created": int(T0 * 1000),
        },
    )
    entry = client.xadd(layout.job_queue(app), {"id": job_id})
    client.hset(layout.job(app, job_id), "entry", entry)


async def test_outcomes_of_jobs_outside_workflows_read_each_job_once(
    store: JobStore, redis_client: redis.Redis, redis_url: str, app_name: str
) -> None:
    await store.prepare()
    enqueue(redis_client, redis_url, app_name, "ok")
    enqueue(redis_client, redis_url, app_name, "bad")
    taken = {d.id: d for d in await store.take("e1", 5, 0, ManualClock(T0))}
    redis_client.config_resetstat()
    outcomes = [
        Outcome("success", taken["ok"].ticket, "ok", T0 + 1, result=b"v"),
        Outcome("dead", taken["bad"].ticket, "bad", T0 + 1, error=ErrorInfo("Boom", "no")),
    ]
    assert await store.finish("e1", outcomes, TTL) == []
    stats = redis_client.info("commandstats")
    assert stats["cmdstat_hmget"]["calls"] == 2  # one read of each job's hash
    assert "cmdstat_hget" not in stats
    assert "cmdstat_hexists" not in stats
    assert await store.status("ok") == JobStatus.SUCCESS
    assert await store.status("bad") == JobStatus.DEAD
    [(_, dead)] = redis_client.xrange(layout_for(redis_url).job_dead(app_name))
    assert (dead[b"id"], dead[b"name"], dead[b"error"]) == (b"bad", b"add", b"Boom: no")
