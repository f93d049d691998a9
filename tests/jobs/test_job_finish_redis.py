"""Recording outcomes on Redis (job_finish.lua) for jobs outside any workflow: one read
of the job's hash answers both whether it still exists and whether it is a workflow's,
so such a job pays no workflow lookups."""

from __future__ import annotations

import redis

from runnel.jobs import ErrorInfo, JobStatus, ManualClock
from runnel.jobs.model import Outcome
from runnel.store import JobStore
from runnel_redis.layout import layout_for
from tests.support import servers
from tests.support.job_hashes import T0, write_job

TTL = 60.0


async def test_outcomes_of_jobs_outside_workflows_read_each_job_once(
    redis_job_store: JobStore, redis_client: redis.Redis, redis_url: str, app_name: str
) -> None:
    await redis_job_store.prepare()
    write_job(redis_client, redis_url, app_name, "ok")
    write_job(redis_client, redis_url, app_name, "bad")
    taken = {d.id: d for d in await redis_job_store.take("e1", 5, 0, ManualClock(T0))}
    servers.admin(redis_client, "CONFIG", "RESETSTAT")
    outcomes = [
        Outcome("success", taken["ok"].ticket, "ok", T0 + 1, result=b"v"),
        Outcome("dead", taken["bad"].ticket, "bad", T0 + 1, error=ErrorInfo("Boom", "no")),
    ]
    assert await redis_job_store.finish("e1", outcomes, TTL) == []
    stats = redis_client.info("commandstats")
    assert stats["cmdstat_hmget"]["calls"] == 2  # one read of each job's hash
    assert "cmdstat_hget" not in stats
    assert "cmdstat_hexists" not in stats
    assert await redis_job_store.status("ok") == JobStatus.SUCCESS
    assert await redis_job_store.status("bad") == JobStatus.DEAD
    [(_, dead)] = redis_client.xrange(layout_for(redis_url).job_dead(app_name))
    assert (dead[b"id"], dead[b"name"], dead[b"error"]) == (b"bad", b"add", b"Boom: no")
