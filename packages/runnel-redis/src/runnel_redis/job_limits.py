"""Rate and concurrency limits of jobs on Redis (lua/job_admit.lua; runnel.jobs.limits).

``__jobs:{app}.held.{name}`` hash: ticket -> executor, one field per delivery of the job
                             ``name`` admitted and not ended (its concurrency slots); freed
                             by job_finish.lua (the outcome names it), job_cancel.lua, and
                             at the next admission once the executor's heartbeat expired
``__jobs:{app}.rate.{name}`` hash: ``t`` the next start's turn and ``l`` the last turn
                             promised to a job put off (microseconds, by the server's
                             clock), expiring once both are past

Both carry the app's hash tag, as every job key does, so the script runs unchanged on a
Redis Cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from redis.asyncio.cluster import RedisCluster

from runnel.jobs.limits import GONE, Deferral, JobLimits, LimitKind
from runnel.jobs.model import Delivery
from runnel_redis import resp, scripts
from runnel_redis.cluster_calls import ClusterScript

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from runnel_redis.layout import KeyLayout


class RedisJobLimits:
    """:meth:`JobStore.admit` for :class:`RedisJobStore` (a mixin, so that jobs.py stays
    the size it is); its script is made on first use, the only call that needs it."""

    _admit_script: Any = None
    redis: aioredis.Redis
    app: str
    layout: KeyLayout
    prefix: str
    queue: str
    schedule: str
    group: str

    async def admit(
        self, executor: str, delivery: Delivery, limits: JobLimits, now: float, wait: float
    ) -> Deferral | str | None:
        store = self
        script = self._admit_script
        if script is None:
            client: Any = store.redis
            script = self._admit_script = (
                ClusterScript(client, scripts.JOB_ADMIT)
                if isinstance(client, RedisCluster)
                else resp.Script(client, scripts.JOB_ADMIT)
            )
        layout, app, name = store.layout, store.app, delivery.name
        queue, _, entry = delivery.ticket.rpartition(b"/")
        named = queue.decode()
        rate = limits.rate
        keys = [
            layout.job_queue(app, named) if named else store.queue,
            layout.job_schedule(app, named) if named else store.schedule,
            layout.job(app, delivery.id),
            store.prefix + "held." + name,
            store.prefix + "rate." + name,
        ]
        args = [
            store.prefix,
            store.group,
            executor,
            entry,
            delivery.ticket,
            delivery.id,
            int(now * 1000),
            limits.concurrency or 0,
            max(1, int(wait * 1000)),
            0 if rate is None else rate.interval_us,
            0 if rate is None else rate.burst_us,
        ]
        reply = await script(keys=keys, args=args)
        verdict = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
        if verdict == "ok":
            return None
        if verdict == "gone":
            return GONE
        limit: LimitKind = "rate" if verdict == "rate" else "concurrency"
        return Deferral(limit, int(reply[1]) / 1000)
