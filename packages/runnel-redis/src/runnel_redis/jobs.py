"""The job queue on Redis: a stream, a sorted set, hashes and lists (docs/jobs.md).

``__jobs:{app}.queue``       stream of ``{id}`` entries, read by the group ``workers``,
                             one consumer per job executor; XACKed and XDELed when done
``__jobs:{app}.schedule``    sorted set: job id by due time (ms): countdowns and retries
``__jobs:{app}.dead``        stream of dead letters ``{id, name, error}``
``__jobs:{app}.job.{id}``    hash: the job (name, status, payload, tries, times, error...)
``__jobs:{app}.result.{id}`` list of one item: the result (waited on with BLMOVE)
``__jobs:{app}.results``     sorted set: job id by result expiry (to count results)
``__jobs:{app}.cancelled``   sorted set: job id by the expiry of its cancelled record
``__jobs:{app}.executors``   hash: executor id -> its description (JSON)
``__jobs:{app}.beat.{executor}`` its heartbeat, expiring (JSON description)
``__jobs:{app}.ticks``       hash: periodic job name -> its last settled tick (ms)
``__jobs:{app}.cancel.{executor}`` list: ids of jobs cancelled while it ran them

Whenever several keys change together, a Lua script (``lua/job_*.lua``) does it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from runnel.jobs import codec
from runnel.jobs.clock import Clock
from runnel.jobs.model import (
    Abandoned,
    DeadLetter,
    Delivery,
    ExecutorState,
    JobRecord,
    JobStatus,
    NewJob,
    Outcome,
    Progress,
    QueueCounts,
)
from runnel.store.jobs import JobStore
from runnel_redis import keys, resp, scripts
from runnel_redis.layout import Classic, KeyLayout
from runnel_redis.replicas import check_replicated
from runnel_redis.seam import guarded

_KINDS = {"success": b"s", "retry": b"r", "dead": b"d", "release": b"q"}
_FOUR = b"$%d\r\n%s\r\n$%d\r\n%s\r\n"
"""Two bulk strings in RESP (lengths and bytes), for the values of a job that change."""


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@guarded
class RedisJobStore(JobStore):
    wait_replicas = 0
    """Replicas that must hold an enqueue before it returns (the ``wait_replicas`` setting)."""
    wait_timeout_ms = 1000

    def __init__(self, client: aioredis.Redis, app: str, layout: KeyLayout | None = None) -> None:
        super().__init__()
        self.redis = client
        self.app = app
        self.layout = layout = layout or Classic()
        self.prefix = layout.jobs_prefix(app)
        self.queue = layout.job_queue(app)
        self.schedule = layout.job_schedule(app)
        self.dead = layout.job_dead(app)
        self.results_index = layout.job_results_index(app)
        self.registry = layout.job_executors(app)
        self.ticks = layout.job_ticks(app)
        self.cancelled_index = layout.job_cancelled_index(app)
        self.group = keys.JOB_GROUP
        self._prefix_arg = resp.arguments((self.prefix,))
        self._queue_keys = [self.queue, self.schedule]
        self._described: dict[tuple[str, str, int, bool], bytes] = {}

        def script(text: str) -> resp.Script:
            return resp.Script(client, text)

        self._enqueue = script(scripts.JOB_ENQUEUE)
        self._take = script(scripts.JOB_TAKE)
        self._finish = script(scripts.JOB_FINISH)
        self._promote = script(scripts.JOB_PROMOTE)
        self._abandoned = script(scripts.JOB_ABANDONED)
        self._forget = script(scripts.JOB_FORGET)
        self._replay = script(scripts.JOB_REPLAY)
        self._purge = script(scripts.JOB_PURGE)
        self._settle = script(scripts.JOB_SETTLE)
        self._cancel = script(scripts.JOB_CANCEL)
        self._progress = script(scripts.JOB_PROGRESS)

    def __repr__(self) -> str:
        return f"<RedisJobStore {self.app}>"

    # Enqueuing.

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[bool]:
        packed = [self._prefix_arg]
        described = self._described
        for job in jobs:
            kind = (job.name, job.codec, job.retries, job.results)
            tail = described.get(kind)
            if tail is None:  # the same for every call of one job function: packed once
                tail = described[kind] = resp.arguments(
                    (job.name, job.codec, job.retries, 1 if job.results else 0)
                )
            job_id = job.id.encode()
            created = b"%d" % (job.created * 1000)
            due = b"" if job.due is None else b"%d" % (job.due * 1000)
            packed.append(
                _FOUR % (len(job_id), job_id, len(job.payload), job.payload)
                + _FOUR % (len(created), created, len(due), due)
                + tail
            )
        count, args = 1 + 8 * len(jobs), b"".join(packed)
        if self.wait_replicas:
            added = await self._enqueue_and_wait(count, args)
        else:
            added = await self._enqueue.packed(self._queue_keys, count, args)
        return [bool(x) for x in added]

    async def _enqueue_and_wait(self, count: int, args: bytes) -> Any:
        """The enqueue script, then WAIT on the same connection (``wait_replicas``)."""
        keys = self._queue_keys
        packed = (
            resp.header(3 + len(keys) + count)
            + resp.arguments(("EVAL", self._enqueue.text, len(keys), *keys))
            + args
            + resp.command("WAIT", self.wait_replicas, self.wait_timeout_ms)
        )
        added, acknowledged = await resp.exchange(self.redis, packed, 2)
        for reply in (added, acknowledged):
            if isinstance(reply, Exception):
                raise reply
        check_replicated(int(acknowledged), self.wait_replicas, self.wait_timeout_ms)
        return added

    # Periodic jobs.

    async def last_ticks(self, names: Sequence[str]) -> dict[str, float | None]:
        if not names:
            return {}
        stored = await self.redis.hmget(self.ticks, list(names))
        return {n: _seconds(v) for n, v in zip(names, stored, strict=True)}

    async def settle_ticks(
        self, name: str, last: float | None, tick: float, jobs: Sequence[NewJob]
    ) -> tuple[bool, float | None]:
        # Rounded, not truncated: the compare-and-set needs the very value stored.
        ms: list[Any] = [b"" if last is None else round(last * 1000), round(tick * 1000)]
        args: list[Any] = [self.prefix, name, *ms]
        if jobs:
            first = jobs[0]
            assert all(
                (j.name, j.codec, j.retries, j.results, j.due)
                == (name, first.codec, first.retries, first.results, None)
                for j in jobs
            ), "one periodic job's ticks, due now"
            args += (first.codec, first.retries, 1 if first.results else 0)
            for job in jobs:
                args += (job.id, job.payload, _ms(job.created))
        else:
            args += (b"", 0, 0)
        done, stored = await self._settle(keys=[self.ticks, self.queue], args=args)
        return bool(int(done)), _seconds(stored)

    # Running jobs.

    async def prepare(self) -> None:
        try:
            await self.redis.xgroup_create(self.queue, self.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def take(self, executor: str, count: int, block_ms: int, clock: Clock) -> list[Delivery]:
        head = [self.prefix, self.group, executor]
        try:
            reply = await self._take(keys=[self.queue], args=[*head, _ms(clock.now()), count])
            if reply or block_ms <= 0:
                return _deliveries(reply)
            read = await self.redis.execute_command(
                "XREADGROUP", "GROUP", self.group, executor, "COUNT", count,
                "BLOCK", block_ms, "STREAMS", self.queue, ">",
            )  # fmt: skip
        except ResponseError as exc:
            if "NOGROUP" in str(exc):  # the queue was deleted under us: make it again
                await self.prepare()
                return []
            raise
        pairs = _entries(read)
        if not pairs:
            return []
        flat = [x for pair in pairs for x in pair]
        reply = await self._take(keys=[self.queue], args=[*head, _ms(clock.now()), count, *flat])
        return _deliveries(reply)

    async def finish(
        self,
        executor: str,
        outcomes: Sequence[Outcome],
        results_ttl: float,
        *,
        only_if_dead: bool = False,
    ) -> list[str]:
        now = max((o.at for o in outcomes), default=0.0)
        args: list[Any] = [
            self.prefix,
            self.group,
            _ms(results_ttl),
            _ms(now),
            self.layout.job_beat(self.app, executor) if only_if_dead else b"",
        ]
        for o in outcomes:
            a: Any = b""
            b: Any = b""
            if o.kind in ("success", "dead") and o.result is not None:
                a = o.result
            if o.kind == "retry":
                assert o.due is not None
                a = _ms(o.due)
            if o.kind == "release" and o.uncount:
                a = b"1"
            if o.error is not None:
                b = codec.error_json(o.error)
            args += (_KINDS[o.kind], o.ticket, o.id, _ms(o.at), a, b)
        refused = await self._finish(
            keys=[self.queue, self.schedule, self.dead, self.results_index], args=args
        )
        return [_text(x) for x in refused]

    async def report_progress(self, executor: str, job_id: str, progress: Progress) -> bool:
        kept = await self._progress(
            keys=[self.layout.job(self.app, job_id)],
            args=[executor, progress.tries, codec.progress_json(progress)],
        )
        return bool(kept)

    async def promote_due(self, now: float, limit: int) -> int:
        moved = await self._promote(
            keys=[self.schedule, self.queue], args=[self.prefix, _ms(now), limit]
        )
        return int(moved)

    # Executors.

    async def beat(self, executor: str, info: Mapping[str, Any], ttl: float) -> None:
        described = json.dumps(dict(info), default=str)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(self.layout.job_beat(self.app, executor), described, px=max(1, _ms(ttl)))
            pipe.hset(self.registry, executor, described)
            await pipe.execute()

    async def executors(self) -> list[ExecutorState]:
        registered = await self.redis.hgetall(self.registry)
        if not registered:
            return []
        ids = sorted(_text(k) for k in registered)
        beats = await self.redis.mget([self.layout.job_beat(self.app, e) for e in ids])
        out = []
        for executor, beat in zip(ids, beats, strict=True):
            raw = beat if beat is not None else registered.get(executor.encode())
            out.append(ExecutorState(executor, alive=beat is not None, info=_json(raw)))
        return out

    async def abandoned(self, executor: str, limit: int) -> list[Abandoned]:
        reply = await self._abandoned(
            keys=[self.queue], args=[self.prefix, self.group, executor, limit]
        )
        out = []
        for i in range(0, len(reply), 8):
            entry, job_id, name, status, started, tries, retries, results = reply[i : i + 8]
            out.append(
                Abandoned(
                    ticket=entry,
                    id=_text(job_id),
                    name=_text(name),
                    status=_status(status),
                    started=bool(int(started)),
                    tries=int(tries),
                    retries=int(retries),
                    results=_text(results) == "1",
                )
            )
        return out

    async def forget(self, executor: str) -> bool:
        return bool(await self._forget_call(executor, leaving=False))

    async def leave(self, executor: str) -> None:
        await self._forget_call(executor, leaving=True)

    async def _forget_call(self, executor: str, *, leaving: bool) -> Any:
        beat = self.layout.job_beat(self.app, executor)
        notices = self.layout.job_notices(self.app, executor)
        return await self._forget(
            keys=[self.queue, self.registry, beat, notices],
            args=[self.group, executor, b"1" if leaving else b"0"],
        )

    # Cancelling.

    async def cancel(self, job_id: str, at: float, results_ttl: float) -> JobStatus:
        job = self.layout.job(self.app, job_id)
        before = await self._cancel(
            keys=[self.queue, self.schedule, self.cancelled_index, job],
            args=[self.prefix, self.group, job_id, _ms(at), max(1, _ms(results_ttl))],
        )
        return _status(before)

    async def cancelled(self, executor: str, within: float) -> list[str]:
        key = self.layout.job_notices(self.app, executor)
        first = await self.redis.blpop([key], max(0.001, within))
        if not first:
            return []
        rest = await self.redis.lpop(key, 1000) or []
        return [_text(first[1]), *(_text(x) for x in cast(list[bytes], rest))]

    # Looking.

    async def status(self, job_id: str) -> JobStatus:
        return _status(await self.redis.hget(self.layout.job(self.app, job_id), "status"))

    async def job(self, job_id: str) -> JobRecord | None:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.layout.job(self.app, job_id))
            pipe.lindex(self.layout.job_result(self.app, job_id), 0)
            raw, result = await pipe.execute()
        if not raw:
            return None
        h = {_text(k): v for k, v in raw.items()}
        return JobRecord(
            id=job_id,
            name=_text(h.get("name", b"")),
            status=_status(h.get("status")),
            payload=h.get("payload", b""),
            codec=_text(h.get("codec", b"json")),
            tries=int(h.get("tries", 0)),
            retries=int(h.get("retries", 0)),
            results=_text(h.get("results", b"1")) == "1",
            created=_seconds(h.get("created")),
            due=_seconds(h.get("due")),
            started=_seconds(h.get("started")),
            finished=_seconds(h.get("finished")),
            executor=_text(h["executor"]) if h.get("executor") else None,
            error=codec.error_from_json(h.get("error")),
            result=result,
            progress=codec.progress_from_json(h.get("progress")),
        )

    async def wait_result(self, job_id: str, within: float) -> bytes | None:
        key = self.layout.job_result(self.app, job_id)
        # Pop and push back onto the same list: a blocking read that leaves the result
        # in place for other waiters.
        # redis-py types the timeout as int, but BLMOVE takes fractional seconds.
        item = await self.redis.blmove(key, key, max(0.001, within), "RIGHT", "RIGHT")  # type: ignore[arg-type]
        return cast(bytes | None, item)  # no decode_responses: bytes

    async def counts(self, now: float) -> QueueCounts:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.xlen(self.queue)
            pipe.xpending(self.queue, self.group)
            pipe.zcard(self.schedule)
            pipe.xlen(self.dead)
            pipe.zcount(self.results_index, f"({_ms(now)}", "+inf")
            pipe.zrange(self.schedule, 0, 0, withscores=True)
            pipe.zcount(self.cancelled_index, f"({_ms(now)}", "+inf")
            length, pending, scheduled, dead, results, first, cancelled = await pipe.execute(
                raise_on_error=False
            )
        executing = 0 if isinstance(pending, Exception) else int(pending.get("pending", 0))
        if isinstance(length, Exception):
            length = 0
        return QueueCounts(
            queued=max(0, int(length) - executing),
            executing=executing,
            scheduled=int(scheduled),
            dead=int(dead) if not isinstance(dead, Exception) else 0,
            results=int(results),
            next_due=first[0][1] / 1000 if first else None,
            cancelled=int(cancelled),
        )

    # Dead letters.

    async def dead_letters(self, limit: int | None = None) -> list[DeadLetter]:
        # redis-py types replies as bytes | str (and None); XRANGE answers a list of bytes.
        entries = cast(
            list[tuple[bytes, dict[bytes, bytes]]],
            await self.redis.xrange(self.dead, count=limit),
        )
        out = []
        for entry, fields in entries:
            f = {_text(k): _text(v) for k, v in fields.items()}
            out.append(
                DeadLetter(
                    ticket=entry,
                    id=f.get("id", ""),
                    name=f.get("name", ""),
                    error=f.get("error", ""),
                    # When it died, by the clock of the worker that buried it (letters
                    # older than that field: by the entry id, the server's clock).
                    at=int(f.get("at") or _text(entry).split("-")[0]) / 1000,
                )
            )
        return out

    async def replay(self, letters: Sequence[DeadLetter], now: float) -> int:
        if not letters:
            return 0
        args: list[Any] = [self.prefix, _ms(now)]
        for letter in letters:
            args += (letter.ticket, letter.id)
        return int(await self._replay(keys=[self.queue, self.dead, self.results_index], args=args))

    async def purge(self, letters: Sequence[DeadLetter]) -> int:
        if not letters:
            return 0
        args: list[Any] = [self.prefix]
        for letter in letters:
            args += (letter.ticket, letter.id)
        return int(await self._purge(keys=[self.dead, self.results_index], args=args))


def _entries(reply: Any) -> list[tuple[bytes, bytes]]:
    """(entry id, job id) pairs from a raw XREADGROUP reply (RESP2 list or RESP3 map)."""
    if not reply:
        return []
    streams = reply.items() if isinstance(reply, dict) else reply
    out = []
    for _, entries in streams:
        for entry, flat in entries or []:
            fields = dict(zip(flat[::2], flat[1::2], strict=True)) if flat else {}
            out.append((entry, fields.get(b"id", b"")))
    return out


def _deliveries(reply: Any) -> list[Delivery]:
    out = []
    for i in range(0, len(reply or ()), 8):
        entry, job_id, name, payload, codec_name, tries, retries, results = reply[i : i + 8]
        out.append(
            Delivery(
                ticket=entry,
                id=_text(job_id),
                name=_text(name or b""),
                payload=payload or b"",
                codec=_text(codec_name or b"json"),
                tries=int(tries),
                retries=int(retries or 0),
                results=results in (b"1", "1", 1),
            )
        )
    return out


def _status(value: Any) -> JobStatus:
    if value is None:
        return JobStatus.UNKNOWN
    try:
        return JobStatus(_text(value))
    except ValueError:
        return JobStatus.UNKNOWN


def _seconds(value: Any) -> float | None:
    if value in (None, b"", ""):
        return None
    return int(value) / 1000


def _json(raw: Any) -> dict[str, object]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
