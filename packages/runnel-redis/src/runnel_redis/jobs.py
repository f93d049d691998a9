"""The job queue on Redis: a stream, a sorted set, hashes and lists (docs/jobs.md).

``__jobs:{app}.queue``       stream of ``{id}`` entries, read by the group ``workers``,
                             one consumer per job executor; XACKed and XDELed when done
``__jobs:{app}.schedule``    sorted set: job id by due time (ms): countdowns and retries
``__jobs:{app}.dead``        stream of dead letters ``{id, name, error}``
                             (those three are the default queue's; a named queue ``q``
                             has ``queue.q``, ``schedule.q`` and ``dead.q``)
``__jobs:{app}.queues``      set: the named queues that ever held a job
``__jobs:{app}.job.{id}``    hash: the job (name, status, payload, tries, times, error...)
``__jobs:{app}.result.{id}`` list of one item: the result (waited on with BLMOVE)
``__jobs:{app}.results``     sorted set: job id by result expiry (to count results)
``__jobs:{app}.cancelled``   sorted set: job id by the expiry of its cancelled record
``__jobs:{app}.executors``   hash: executor id -> its description (JSON)
``__jobs:{app}.beat.{executor}`` its heartbeat, expiring (JSON description)
``__jobs:{app}.ticks``       hash: periodic job name -> its last settled tick (ms)
``__jobs:{app}.cancel.{executor}`` list: ids of jobs cancelled while it ran them
``__jobs:{app}.held.{name}`` and ``rate.{name}``: a limited job's slots and rate
                             (runnel_redis/job_limits.py)

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
    JobTotals,
    NewJob,
    Outcome,
    Progress,
    QueueCounts,
)
from runnel.jobs.queues import DEFAULT_QUEUE, TakePlan
from runnel.store.identity import CallIdentity, call_key
from runnel.store.jobs import JobStore
from runnel_redis import keys, resp, scripts
from runnel_redis.job_browse import RedisJobBrowsing
from runnel_redis.job_limits import RedisJobLimits
from runnel_redis.job_replies import counts_of, deliveries, read_entries
from runnel_redis.job_workflows import RedisWorkflows
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
class RedisJobStore(RedisJobBrowsing, RedisJobLimits, JobStore, RedisWorkflows):
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
        self.totals = layout.job_totals(app)
        self.cancelled_index = layout.job_cancelled_index(app)
        self.named = layout.job_queues(app)
        self.group = keys.JOB_GROUP
        self._prefix_arg = resp.arguments((self.prefix,))
        self._queue_keys = [self.queue, self.schedule, self.named]
        self._described: dict[tuple[str, str, int, bool, str], bytes] = {}

        def script(text: str) -> resp.Script:
            return resp.Script(client, text)

        self._enqueue = script(scripts.JOB_ENQUEUE)
        self._take = script(scripts.JOB_TAKE)
        self._take_queues = script(scripts.JOB_TAKE_QUEUES)
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

    async def enqueue(
        self, jobs: Sequence[NewJob], *, call: CallIdentity | None = None
    ) -> list[bool]:
        packed = [self._prefix_arg, resp.arguments((b"" if call is None else call_key(call),))]
        described = self._described
        for job in jobs:
            kind = (job.name, job.codec, job.retries, job.results, job.queue)
            tail = described.get(kind)
            if tail is None:  # the same for every call of one job function: packed once
                tail = described[kind] = resp.arguments(
                    (job.name, job.codec, job.retries, 1 if job.results else 0, _named(job.queue))
                )
            job_id = job.id.encode()
            created = b"%d" % (job.created * 1000)
            due = b"" if job.due is None else b"%d" % (job.due * 1000)
            packed.append(
                _FOUR % (len(job_id), job_id, len(job.payload), job.payload)
                + _FOUR % (len(created), created, len(due), due)
                + tail
            )
        count, args = 2 + 9 * len(jobs), b"".join(packed)
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
                (j.name, j.codec, j.retries, j.results, j.due, j.queue)
                == (name, first.codec, first.retries, first.results, None, first.queue)
                for j in jobs
            ), "one periodic job's ticks, due now"
            args += (first.codec, first.retries, 1 if first.results else 0, _named(first.queue))
            for job in jobs:
                args += (job.id, job.payload, _ms(job.created))
        else:
            args += (b"", 0, 0, b"")
        keys = [self.ticks, self.queue, self.named]
        done, stored = await self._settle(keys=keys, args=args)
        return bool(int(done)), _seconds(stored)

    # Running jobs.

    async def prepare(self, queues: Sequence[str] = (DEFAULT_QUEUE,)) -> None:
        for queue in queues:
            stream = self.layout.job_queue(self.app, queue)
            try:
                await self.redis.xgroup_create(stream, self.group, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        named = [q for q in queues if q != DEFAULT_QUEUE]
        if named:
            await self.redis.sadd(self.named, *named)

    async def take(
        self,
        executor: str,
        count: int,
        block_ms: int,
        clock: Clock,
        queues: TakePlan | None = None,
    ) -> list[Delivery]:
        if queues is not None:
            return await self._take_from(executor, count, block_ms, clock, queues)
        head = [self.prefix, self.group, executor]
        try:
            reply = await self._take(keys=[self.queue], args=[*head, _ms(clock.now()), count])
            if reply or block_ms <= 0:
                return deliveries(reply)
            read = await self.redis.execute_command(
                "XREADGROUP", "GROUP", self.group, executor, "COUNT", count,
                "BLOCK", block_ms, "STREAMS", self.queue, ">",
            )  # fmt: skip
        except ResponseError as exc:
            if "NOGROUP" in str(exc):  # the queue was deleted under us: make it again
                await self.prepare()
                return []
            raise
        pairs = read_entries(read)
        if not pairs:
            return []
        flat = [x for pair in pairs for x in pair]
        reply = await self._take(keys=[self.queue], args=[*head, _ms(clock.now()), count, *flat])
        return deliveries(reply)

    async def _take_from(
        self, executor: str, count: int, block_ms: int, clock: Clock, plan: TakePlan
    ) -> list[Delivery]:
        """A take from several queues (lua/job_take_queues.lua). With none queued, a
        blocking XREAD on every stream from its last id waits for the next entry, and
        the script runs again: a read of the group would take it before knowing whether
        an earlier queue had one too."""
        streams = [self.layout.job_queue(self.app, name) for name, _ in plan]
        quotas = [x for name, quota in plan for x in (quota, _named(name))]
        head = [self.prefix, self.group, executor]
        try:
            started, wait = await self._take_queues(
                keys=streams, args=[*head, _ms(clock.now()), count, *quotas]
            )
            if started or not wait or block_ms <= 0:
                return deliveries(started)
            await self.redis.execute_command(
                "XREAD", "COUNT", 1, "BLOCK", block_ms, "STREAMS", *streams, *wait
            )
            started, _ = await self._take_queues(
                keys=streams, args=[*head, _ms(clock.now()), count, *quotas]
            )
        except ResponseError as exc:
            if "NOGROUP" in str(exc):  # a queue was deleted under us: make it again
                await self.prepare([name for name, _ in plan])
                return []
            raise
        return deliveries(started)

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
        held = set()  # the concurrency slots these outcomes free (runnel_redis/job_limits.py)
        for o in outcomes:
            if o.slot:
                held.add(self.prefix + "held." + o.slot)
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
        touched = [self.queue, self.schedule, self.dead, self.results_index, self.totals, *held]
        refused = await self._finish(keys=touched, args=args)
        return [_text(x) for x in refused]

    async def report_progress(self, executor: str, job_id: str, progress: Progress) -> bool:
        kept = await self._progress(
            keys=[self.layout.job(self.app, job_id)],
            args=[executor, progress.tries, codec.progress_json(progress)],
        )
        return bool(kept)

    async def promote_due(self, now: float, limit: int) -> int:
        moved = await self._promote(
            keys=[self.schedule, self.queue, self.named], args=[self.prefix, _ms(now), limit]
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
            keys=[self.queue, self.named], args=[self.prefix, self.group, executor, limit]
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
            keys=[self.queue, self.registry, beat, self.named, notices],
            args=[self.group, executor, b"1" if leaving else b"0", self.prefix],
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
        first = await self.redis.blpop([key], max(resp.SHORTEST_BLOCK, within))
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
            queue=_text(h.get("queue") or DEFAULT_QUEUE),
            waiting=_text(h["waiting"]) if h.get("waiting") else None,
            workflow=_text(h["wf"]) if h.get("wf") else None,
        )

    async def wait_result(self, job_id: str, within: float) -> bytes | None:
        key = self.layout.job_result(self.app, job_id)
        # Pop and push back onto the same list: a blocking read that leaves the result
        # in place for other waiters.
        # redis-py types the timeout as int, but BLMOVE takes fractional seconds.
        item = await self.redis.blmove(key, key, max(resp.SHORTEST_BLOCK, within), "RIGHT", "RIGHT")  # type: ignore[arg-type]
        return cast(bytes | None, item)  # no decode_responses: bytes

    async def queues(self) -> list[str]:
        """Every queue: the default one, then the named ones that ever held a job."""
        named = await self.redis.smembers(self.named)
        return [DEFAULT_QUEUE, *sorted(_text(q) for q in named)]

    async def counts(self, now: float) -> QueueCounts:
        queues = await self.queues()
        layout, app = self.layout, self.app
        async with self.redis.pipeline(transaction=False) as pipe:
            for queue in queues:
                stream, schedule = layout.job_queue(app, queue), layout.job_schedule(app, queue)
                pipe.xlen(stream)
                pipe.xpending(stream, self.group)
                pipe.zcard(schedule)
                pipe.xlen(layout.job_dead(app, queue))
                pipe.zrange(schedule, 0, 0, withscores=True)
            pipe.zcount(self.results_index, f"({_ms(now)}", "+inf")
            pipe.zcount(self.cancelled_index, f"({_ms(now)}", "+inf")
            pipe.hmget(self.totals, "s", "r", "d")
            replies = await pipe.execute(raise_on_error=False)
        per = {q: counts_of(*replies[5 * i : 5 * i + 5]) for i, q in enumerate(queues)}
        dues = [c.next_due for c in per.values() if c.next_due is not None]
        return QueueCounts(
            queued=sum(c.queued for c in per.values()),
            executing=sum(c.executing for c in per.values()),
            scheduled=sum(c.scheduled for c in per.values()),
            dead=sum(c.dead for c in per.values()),
            results=int(replies[-3]),
            next_due=min(dues) if dues else None,
            cancelled=int(replies[-2]),
            queues=per,
            totals=JobTotals(*(int(n or 0) for n in replies[-1])),
        )

    # Dead letters.

    async def dead_letters(self, limit: int | None = None) -> list[DeadLetter]:
        queues = await self.queues()
        async with self.redis.pipeline(transaction=False) as pipe:
            for queue in queues:
                pipe.xrange(self.layout.job_dead(self.app, queue), count=limit)
            replies = await pipe.execute()
        # redis-py types replies as bytes | str (and None); XRANGE answers a list of bytes.
        found = [
            (_order(entry), _letter(queue, entry, fields))
            for queue, entries in zip(queues, replies, strict=True)
            for entry, fields in cast(list[tuple[bytes, dict[bytes, bytes]]], entries)
        ]
        if len(queues) > 1:  # oldest first: by the time of death, then by the entry id
            found.sort(key=lambda pair: (pair[1].at, pair[0]))
        letters = [letter for _, letter in found]
        return letters if limit is None else letters[:limit]

    async def replay(self, letters: Sequence[DeadLetter], now: float) -> int:
        replayed = 0
        for queue, entries in _by_queue(letters).items():
            stream, dead = (
                self.layout.job_queue(self.app, queue),
                self.layout.job_dead(self.app, queue),
            )
            keys = [stream, dead, self.results_index, *self._letter_keys(entries)]
            args: list[Any] = [_ms(now), *entries]
            replayed += int(await self._replay(keys=keys, args=args))
        return replayed

    async def purge(self, letters: Sequence[DeadLetter]) -> int:
        purged = 0
        for queue, entries in _by_queue(letters).items():
            dead = self.layout.job_dead(self.app, queue)
            keys = [dead, self.results_index, *self._letter_keys(entries)]
            purged += int(await self._purge(keys=keys, args=entries))
        return purged

    def _letter_keys(self, entries: list[Any]) -> list[str]:
        """Per (entry, job id) pair: the job's record and its result, given to the script
        as keys, not built in it (a server may refuse a key a script was not given)."""
        out: list[str] = []
        for job_id in entries[1::2]:
            name = job_id.decode() if isinstance(job_id, bytes) else str(job_id)
            out += (self.layout.job(self.app, name), self.layout.job_result(self.app, name))
        return out


def _named(queue: str) -> str:
    """How the job scripts are told a queue: '' for the default one, else its name."""
    return "" if queue == DEFAULT_QUEUE else queue


def _split(ticket: bytes) -> tuple[str, bytes]:
    """The queue and the stream entry of a ticket: ``name/entry`` in a named queue, the
    bare entry id in the default one (the job scripts make and read the same)."""
    name, slash, entry = ticket.rpartition(b"/")
    return (name.decode(), entry) if slash else (DEFAULT_QUEUE, ticket)


def _by_queue(letters: Sequence[DeadLetter]) -> dict[str, list[Any]]:
    """Dead letters as the replay and purge scripts take them, per queue: pairs of the
    dead letter's entry and the job id."""
    out: dict[str, list[Any]] = {}
    for letter in letters:
        queue, entry = _split(letter.ticket)
        out.setdefault(queue, []).extend((entry, letter.id))
    return out


def _order(entry: bytes) -> tuple[int, ...]:
    return tuple(int(part) for part in _text(entry).split("-"))


def _letter(queue: str, entry: bytes, fields: dict[bytes, bytes]) -> DeadLetter:
    f = {_text(k): _text(v) for k, v in fields.items()}
    return DeadLetter(
        ticket=entry if queue == DEFAULT_QUEUE else queue.encode() + b"/" + entry,
        id=f.get("id", ""),
        name=f.get("name", ""),
        error=f.get("error", ""),
        # When it died, by the clock of the worker that buried it (letters older than
        # that field: by the entry id, the server's clock).
        at=int(f.get("at") or _text(entry).split("-")[0]) / 1000,
        queue=queue,
    )


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
