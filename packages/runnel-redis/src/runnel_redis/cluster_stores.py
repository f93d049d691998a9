"""The job queue and the schemas on a Redis Cluster: the single-Redis stores' scripts,
called through the cluster client (each store's keys share one slot)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from redis.asyncio.cluster import RedisCluster

from runnel.jobs.model import NewJob
from runnel.jobs.queues import DEFAULT_QUEUE
from runnel.store.identity import CallIdentity, call_key
from runnel_redis import scripts
from runnel_redis.cluster_calls import ClusterScript, eval_call, then_wait
from runnel_redis.jobs import RedisJobStore
from runnel_redis.replicas import check_replicated
from runnel_redis.schemas import RedisSchemaStore
from runnel_redis.seam import guarded

_JOB_SCRIPTS = (
    "_enqueue _take _take_queues _finish _promote _abandoned _forget _replay _purge _settle"
    " _cancel _progress"
).split()


@guarded
class ClusterJobStore(RedisJobStore):
    """The job queue: every key of an app's queue carries the app's tag, so the queue is
    in one slot and its scripts run unchanged, called through the cluster client."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        client = cast(RedisCluster, self.redis)
        self._cluster = client
        for name in _JOB_SCRIPTS:
            setattr(self, name, ClusterScript(client, getattr(self, name).text))

    async def enqueue(
        self, jobs: Sequence[NewJob], *, call: CallIdentity | None = None
    ) -> list[bool]:
        args: list[Any] = [self.prefix, b"" if call is None else call_key(call)]
        for job in jobs:
            args += (
                job.id,
                job.payload,
                b"%d" % (job.created * 1000),
                b"" if job.due is None else b"%d" % (job.due * 1000),
                job.name,
                job.codec,
                job.retries,
                1 if job.results else 0,
                "" if job.queue == DEFAULT_QUEUE else job.queue,
            )
        if not self.wait_replicas:
            added = await self._enqueue(self._queue_keys, args)
            return [bool(x) for x in added]
        script = eval_call(cast(ClusterScript, self._enqueue).text, self._queue_keys, args)
        await self._cluster.initialize()
        node = self._cluster.get_node_from_key(self.queue)
        if node is None:
            raise ConnectionError(f"no master known for {self.queue}")
        [added], acknowledged = await then_wait(
            self._cluster, node, [script], self.wait_replicas, self.wait_timeout_ms
        )
        if isinstance(added, Exception):
            raise added
        check_replicated(
            acknowledged, self.wait_replicas, self.wait_timeout_ms, f" (master {node.name})"
        )
        return [bool(x) for x in added]


@guarded
class ClusterSchemaStore(RedisSchemaStore):
    """Schemas of a stream in one hash; an add is checked against what was read by a
    script (the hash only grows, so an unchanged length means nothing was added)."""

    async def add(self, fingerprint: str, schema: str, check: Any) -> dict[str, str]:
        while True:
            stored = await self.all()
            if fingerprint in stored:
                return stored
            check(stored)
            done = await self.redis.execute_command(
                "EVAL", scripts.ADD_IF_LENGTH, 1, self.key, len(stored), fingerprint, schema
            )
            if done:
                return {**stored, fingerprint: schema}
