"""Workflows in the Redis job store (lua/job_workflow*.lua; docs/jobs.md, "Workflows").

``__jobs:{app}.workflow.{wid}``  hash: the workflow (status, shape, members, result,
                                 left, onerror, failed, error, wait.{id}, done.{id})
``__jobs:{app}.ended.{wid}``     list of one item: its final status (waited on with BLMOVE)
``__jobs:{app}.workflows``       sorted set: workflow id by created (ms), newest last

A member's job hash names its workflow (``wf``) and the jobs waiting for it (``then``).
Every key carries the app's hash tag, so on a Redis Cluster a workflow and all its jobs
are in one slot, and its scripts run there unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from redis.asyncio.cluster import RedisCluster

from runnel.jobs.model import JobStatus
from runnel.jobs.queues import DEFAULT_QUEUE
from runnel.jobs.workflow_model import (
    WORKFLOW_ENDED,
    NewWorkflow,
    WorkflowMember,
    WorkflowRecord,
    WorkflowStatus,
)
from runnel.store.identity import CallIdentity, call_key
from runnel.store.workflows import WorkflowStore
from runnel_redis import resp, scripts
from runnel_redis.cluster_calls import ClusterScript
from runnel_redis.seam import guarded

if TYPE_CHECKING:
    import redis.asyncio as aioredis


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def _seconds(value: Any) -> float | None:
    return None if value in (None, b"", "") else int(value) / 1000


def _job_status(value: Any) -> JobStatus:
    try:
        return JobStatus(_text(value)) if value is not None else JobStatus.UNKNOWN
    except ValueError:
        return JobStatus.UNKNOWN


@guarded
class RedisWorkflows(WorkflowStore):
    """The workflow calls of :class:`runnel_redis.jobs.RedisJobStore` (and the cluster's)."""

    redis: aioredis.Redis
    prefix: str
    named: str

    if TYPE_CHECKING:

        async def cancel(self, job_id: str, at: float, results_ttl: float) -> JobStatus: ...

    def _script(self, name: str, text: str) -> Any:
        cache: dict[str, Any] = self.__dict__.setdefault("_flow_scripts", {})
        found = cache.get(name)
        if found is None:
            if isinstance(self.redis, RedisCluster):
                found = ClusterScript(self.redis, text)
            else:
                found = resp.Script(self.redis, text)
            cache[name] = found
        return found

    def _flow_key(self, workflow_id: str) -> str:
        return f"{self.prefix}workflow.{workflow_id}"

    async def enqueue_workflow(
        self, flow: NewWorkflow, *, call: CallIdentity | None = None
    ) -> bool:
        args: list[Any] = [
            self.prefix,
            flow.id,
            _ms(flow.created),
            flow.shape,
            json.dumps(flow.result, separators=(",", ":")),
            b"" if call is None else call_key(call),
        ]
        for one in flow.jobs:
            job = one.job
            args += (
                job.id,
                job.payload,
                job.name,
                job.codec,
                job.retries,
                "" if job.queue == DEFAULT_QUEUE else job.queue,
                one.waits,
                " ".join(one.then),
                1 if one.on_error else 0,
            )
        script = self._script("enqueue", scripts.JOB_WORKFLOW_ENQUEUE)
        keys = [self.named, self.prefix + "workflows", self._flow_key(flow.id)]
        return bool(int(await script(keys, args)))

    async def workflow(self, workflow_id: str) -> WorkflowRecord | None:
        raw = await self.redis.hgetall(self._flow_key(workflow_id))
        if not raw:
            return None
        h = {_text(k): v for k, v in raw.items()}
        ids = _text(h.get("members", b"")).split()
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hmget(f"{self.prefix}job.{job_id}", ["name", "status"])
            replies = await pipe.execute() if ids else []
        members = [
            WorkflowMember(job_id, _text(name or b""), _job_status(status))
            for job_id, (name, status) in zip(ids, replies, strict=True)
        ]
        try:
            status = WorkflowStatus(_text(h.get("status", b"")))
        except ValueError:
            status = WorkflowStatus.UNKNOWN
        return WorkflowRecord(
            id=workflow_id,
            shape=_text(h.get("shape", b"")),
            status=status,
            created=_seconds(h.get("created")),
            finished=_seconds(h.get("finished")),
            members=members,
            result=json.loads(h.get("result") or b"null"),
            failed=_text(h["failed"]) if h.get("failed") else None,
            error=_text(h["error"]) if h.get("error") else None,
            on_error=_text(h["onerror"]) if h.get("onerror") else None,
        )

    async def workflows(self, limit: int) -> list[WorkflowRecord]:
        index = self.prefix + "workflows"
        out: list[WorkflowRecord] = []
        gone: list[Any] = []
        start = 0
        while len(out) < limit:
            ids = await self.redis.zrevrange(index, start, start + limit - 1)
            if not ids:
                break
            start += len(ids)
            for raw in ids:
                record = await self.workflow(_text(raw))
                if record is None:
                    gone.append(raw)
                elif len(out) < limit:
                    out.append(record)
        if gone:  # expired: forgotten by the index too
            await self.redis.zrem(index, *gone)
        return out

    async def member_results(self, job_ids: Sequence[str]) -> list[tuple[str, bytes | None]]:
        if not job_ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hget(f"{self.prefix}job.{job_id}", "codec")
                pipe.lindex(f"{self.prefix}result.{job_id}", 0)
            replies = await pipe.execute()
        return [(_text(replies[2 * i] or b"json"), replies[2 * i + 1]) for i in range(len(job_ids))]

    async def wait_workflow(self, workflow_id: str, within: float) -> bool:
        key = f"{self.prefix}ended.{workflow_id}"
        # Pop and push back onto the same list: the item stays for other waiters.
        item = await self.redis.blmove(key, key, max(resp.SHORTEST_BLOCK, within), "RIGHT", "RIGHT")  # type: ignore[arg-type]
        if item is not None:
            return True
        status = await self.redis.hget(self._flow_key(workflow_id), "status")
        return status is None or _text(status) in WORKFLOW_ENDED

    async def cancel_workflow(
        self, workflow_id: str, at: float, results_ttl: float
    ) -> WorkflowStatus:
        script = self._script("cancel", scripts.JOB_WORKFLOW_CANCEL)
        before, members = await script(
            [self._flow_key(workflow_id)],
            [self.prefix, workflow_id, _ms(at), max(1, _ms(results_ttl))],
        )
        for job_id in _text(members or b"").split():
            await self.cancel(job_id, at, results_ttl)
        try:
            return WorkflowStatus(_text(before))
        except ValueError:
            return WorkflowStatus.UNKNOWN
