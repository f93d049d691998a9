"""Browsing the job queue on Redis (the dashboard's lists) and making a scheduled job due
now (lua/job_hasten.lua): a mixin of :class:`~runnel_redis.jobs.RedisJobStore`, so that
jobs.py stays the size it is. Every key read carries the app's hash tag, so this runs
unchanged on a Redis Cluster."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from redis.asyncio.cluster import RedisCluster

from runnel_redis import resp, scripts
from runnel_redis.cluster_calls import ClusterScript

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from runnel_redis.layout import KeyLayout


class RedisJobBrowsing:
    _hasten_script: Any = None
    redis: aioredis.Redis
    app: str
    layout: KeyLayout
    prefix: str
    schedule: str
    results_index: str
    cancelled_index: str
    queues: Callable[[], Awaitable[list[str]]]  # RedisJobStore's

    async def scheduled_jobs(self, limit: int) -> list[tuple[str, float]]:
        if limit <= 0:
            return []
        queues = await self.queues()
        async with self.redis.pipeline(transaction=False) as pipe:
            for queue in queues:
                pipe.zrange(
                    self.layout.job_schedule(self.app, queue), 0, limit - 1, withscores=True
                )
            replies = await pipe.execute()
        found = [(float(at), _text(job_id)) for reply in replies for job_id, at in reply]
        found.sort()
        return [(job_id, at / 1000) for at, job_id in found[:limit]]

    async def ended_jobs(self, now: float, limit: int) -> list[str]:
        if limit <= 0:
            return []
        after = f"({int(now * 1000)}"
        async with self.redis.pipeline(transaction=False) as pipe:
            for index in (self.results_index, self.cancelled_index):
                pipe.zrange(
                    index,
                    "+inf",
                    after,
                    desc=True,
                    byscore=True,
                    offset=0,
                    num=limit,
                    withscores=True,
                )
            replies = await pipe.execute()
        found = [(float(until), _text(job_id)) for reply in replies for job_id, until in reply]
        found.sort(reverse=True)
        return [job_id for _, job_id in found[:limit]]

    async def hasten(self, job_id: str, now: float) -> bool:
        script = self._hasten_script
        if script is None:
            client: Any = self.redis
            script = self._hasten_script = (
                ClusterScript(client, scripts.JOB_HASTEN)
                if isinstance(client, RedisCluster)
                else resp.Script(client, scripts.JOB_HASTEN)
            )
        keys = [self.schedule, self.layout.job(self.app, job_id)]
        done = await script(keys=keys, args=[self.prefix, job_id, int(now * 1000)])
        return int(done) == 1


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
