"""Membership, control messages, locks, heartbeats and leadership on Redis keys."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from runnel.exceptions import StoreFull
from runnel.runtime.retry import reraise_if_cancelled
from runnel.store.coordination import (
    Coordination,
    Leadership,
    Members,
    Quarantine,
    ReadResult,
    members_from_json,
    members_to_json,
)
from runnel.store.log import PartitionId, Position
from runnel.store.state import Commit
from runnel_redis import resp, scripts
from runnel_redis.commits import changes, commit_arguments
from runnel_redis.layout import Classic, KeyLayout
from runnel_redis.seam import guarded

ADMIN_TTL_MS = 10_000
ADMIN_WAIT = 0.05
CONTROL_MAXLEN = 1000


@guarded
class RedisCoordination(Coordination):
    def __init__(
        self,
        client: aioredis.Redis,
        app: str,
        stream: str,
        processor: str,
        group: str,
        key_of: Callable[[PartitionId], str] | None = None,
        layout: KeyLayout | None = None,
    ) -> None:
        self.redis = client
        self.layout = layout = layout or Classic()
        self.key_of = key_of or (lambda p: layout.partition(*p))
        self.app, self.stream, self.processor, self.group = app, stream, processor, group
        self.membership_key = layout.membership(app, stream, processor)
        self.control_key = layout.control(app, stream, processor)
        self.admin_key = layout.admin_lock(app, stream, processor)
        self.quarantine_key = layout.quarantine(app, stream, processor)
        self._acquire = resp.Script(client, scripts.ACQUIRE)
        self._release = resp.Script(client, scripts.RELEASE)
        self._beat = resp.Script(client, scripts.BEAT)
        self._take = resp.Script(client, scripts.TAKE)
        self._announce = resp.Script(client, scripts.ANNOUNCE)
        self._eval_check_locks: bytes | None = None  # known at the first read
        self._fenced_read = resp.Script(client, scripts.FENCED_READ)
        self._commit = resp.Script(client, scripts.COMMIT)
        # The same keys, group and owner go out in every read and acknowledgement:
        # packed once (RESP bulk strings), kept here.
        self._bulks: dict[str, bytes] = {}  # group, owner, consumer -> packed
        self._lock_bulks: dict[PartitionId, bytes] = {}  # partition -> its packed lock key
        self._key_bulks: dict[PartitionId, bytes] = {}  # partition -> its packed stream key
        self._partitions: dict[bytes, PartitionId] = {}  # stream key in replies -> partition
        self._read_head = resp.arguments(("XREADGROUP", "GROUP", group))

    def lock_key(self, partition: PartitionId) -> str:
        return self.layout.partition_lock(self.app, self.stream, self.processor, partition.number)

    def heartbeat_key(self, executor: str) -> str:
        return self.layout.heartbeat(self.app, self.stream, self.processor, executor)

    def _bulk(self, text: str) -> bytes:
        packed = self._bulks.get(text)
        if packed is None:
            packed = self._bulks[text] = resp.arguments((text,))
        return packed

    def _locks_of(self, partitions: Sequence[PartitionId]) -> bytes:
        """The packed lock keys of these partitions."""
        bulks = self._lock_bulks
        out = []
        for partition in partitions:
            lock = bulks.get(partition)
            if lock is None:
                lock = bulks[partition] = resp.arguments((self.lock_key(partition),))
            out.append(lock)
        return b"".join(out)

    def _streams(self, partitions: Sequence[PartitionId]) -> bytes:
        bulks = self._key_bulks
        out = []
        for partition in partitions:
            packed = bulks.get(partition)
            if packed is None:
                key = self.key_of(partition)
                self._partitions[key.encode()] = partition
                packed = bulks[partition] = resp.arguments((key,))
            out.append(packed)
        return b"".join(out)

    # Membership and control.

    async def members(self) -> Members:
        raw = await self.redis.get(self.membership_key)
        return _parse_members(raw)

    async def change_members(
        self, change: Callable[[Members], Members], reason: str, executor: str
    ) -> Members:
        token = uuid.uuid4().hex
        await self._take_admin_lock(token)
        try:
            members = change(_parse_members(await self.redis.get(self.membership_key)))
            await self._announce(
                keys=[self.membership_key, self.control_key],
                args=[
                    json.dumps(members_to_json(members), sort_keys=True),
                    CONTROL_MAXLEN,
                    reason,
                    executor,
                ],
            )
            return members
        finally:
            await self._release(keys=[self.admin_key], args=[token])

    async def _take_admin_lock(self, token: str) -> None:
        while True:
            reraise_if_cancelled()  # redis-py may have swallowed one
            try:
                if await self._take(keys=[self.admin_key], args=[token, ADMIN_TTL_MS]):
                    return
            except (ConnectionError, TimeoutError, RedisConnectionError, RedisTimeoutError):
                # The reply may be lost after the lock was set: look before trying again.
                if await self.redis.get(self.admin_key) == token.encode():
                    return
                raise
            await asyncio.sleep(ADMIN_WAIT)

    async def announce(self, reason: str, executor: str) -> None:
        await self._announce(keys=[self.control_key], args=["", CONTROL_MAXLEN, reason, executor])

    async def control_tail(self) -> bytes:
        # redis-py types replies as bytes | str; this client (no decode_responses) gives bytes.
        last = cast(list[tuple[bytes, Any]], await self.redis.xrevrange(self.control_key, count=1))
        return last[0][0] if last else b"0-0"

    async def control(self, after: bytes, block_ms: int) -> tuple[bytes, list[dict[str, str]]]:
        reply = await self.redis.execute_command(
            "XREAD", "COUNT", 100, "BLOCK", block_ms, "STREAMS", self.control_key, after
        )
        if not reply:
            return after, []
        messages = []
        for _, entries in reply.items() if isinstance(reply, dict) else reply:
            for xid, flat in entries:
                it = iter(flat)
                messages.append({k.decode(): v.decode() for k, v in zip(it, it, strict=True)})
                after = xid
        return after, messages

    # Locks and heartbeats.

    async def acquire(
        self, owner: str, partitions: Sequence[PartitionId], ttl_ms: int
    ) -> set[PartitionId]:
        if not partitions:
            return set()
        got = await self._acquire(keys=[self.lock_key(p) for p in partitions], args=[owner, ttl_ms])
        return {p for p, ok in zip(partitions, got, strict=True) if ok}

    async def release(self, owner: str, partitions: Sequence[PartitionId]) -> None:
        if partitions:
            await self._release(keys=[self.lock_key(p) for p in partitions], args=[owner])

    async def beat(
        self, owner: str, partitions: Sequence[PartitionId], ttl_ms: int
    ) -> set[PartitionId]:
        beat_key = self.heartbeat_key(owner)
        held = await self._beat(
            keys=[beat_key, *[self.lock_key(p) for p in partitions]], args=[owner, ttl_ms]
        )
        return {p for p, ok in zip(partitions, held, strict=True) if ok}

    async def alive(self, executors: Sequence[str]) -> set[str]:
        if not executors:
            return set()
        async with self.redis.pipeline(transaction=False) as pipe:
            for e in executors:
                pipe.exists(self.heartbeat_key(e))
            found = await pipe.execute()
        return {e for e, n in zip(executors, found, strict=True) if n}

    async def lock_owners(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, str | None]:
        if not partitions:
            return {}
        # redis-py types replies as bytes | str; this client (no decode_responses) gives bytes.
        values = cast(
            list[bytes | None], await self.redis.mget([self.lock_key(p) for p in partitions])
        )
        return {p: (v.decode() if v else None) for p, v in zip(partitions, values, strict=True)}

    # Fenced reading and acknowledging.

    async def read(
        self, owner: str, consumer: str, positions: Mapping[PartitionId, Position], count: int
    ) -> ReadResult:
        result, _ = await self.read_and_ack(owner, consumer, positions, count, {})
        return result

    async def read_and_ack(
        self,
        owner: str,
        consumer: str,
        positions: Mapping[PartitionId, Position],
        count: int,
        ids: Mapping[PartitionId, Sequence[bytes]],
    ) -> tuple[ReadResult, list[PartitionId]]:
        """Acknowledge and read on the partitions whose lock we hold, in one round trip:

        ``WATCH locks; EVAL CHECK_LOCKS; MULTI; XACK ...; XREADGROUP ...; EXEC``

        The check runs after the WATCH, and touches any lock another executor holds, so
        Redis runs the transaction only if every lock was ours or nobody's at the check
        and none changed since: one check fences the acknowledgements and the read of
        every partition in it. The entries never pass through Lua (converting a large
        XREADGROUP reply to Lua and back costs Redis twice the read itself), the XACKs
        run as plain commands (a script pays for each call it makes), and nothing waits
        on a reply before sending the next command. A refused transaction (a lost lock,
        or our own heartbeat renewing a lock in between) is tried again without the lost
        ones; acknowledgements still unsent after that go through FENCED_ACK_MANY.
        """
        acking = {p: xids for p, xids in ids.items() if xids}
        return await self._read_fenced(owner, consumer, positions, count, acking, {})

    commits_ride = True

    async def read_and_commit(
        self,
        owner: str,
        consumer: str,
        positions: Mapping[PartitionId, Position],
        count: int,
        commits: Mapping[PartitionId, Commit],
    ) -> tuple[ReadResult, list[PartitionId]]:
        """:meth:`read_and_ack` with table writes: a partition's COMMIT (which checks its
        lock again itself) is queued in the same transaction, before the read, in place of
        its XACK:

        ``WATCH locks; EVAL CHECK_LOCKS; MULTI; EVALSHA COMMIT ...; XREADGROUP ...; EXEC``
        """
        acking = {p: c.ids for p, c in commits.items() if c.ids and not changes(c)}
        committing = {p: c for p, c in commits.items() if changes(c)}
        return await self._read_fenced(owner, consumer, positions, count, acking, committing)

    async def _read_fenced(
        self,
        owner: str,
        consumer: str,
        positions: Mapping[PartitionId, Position],
        count: int,
        acking: dict[PartitionId, Sequence[bytes]],
        committing: dict[PartitionId, Commit],
    ) -> tuple[ReadResult, list[PartitionId]]:
        result = ReadResult()
        unacked: list[PartitionId] = []
        reading = {p: _redis_id(position) for p, position in positions.items()}
        for _ in range(READ_ATTEMPTS):
            if not reading and not acking and not committing:
                break
            fenced = list(dict.fromkeys([*reading, *acking, *committing]))
            try:
                held, reply, sent = await self._checked_read(
                    owner, consumer, reading, count, acking, committing
                )
            except StoreFull:
                # A full Redis refuses the whole transaction: each part on its own.
                if committing:
                    unacked += await self.commit(owner, committing)
                    committing = {}
                if acking:
                    unacked += await self.ack(owner, acking)
                    acking = {}
                if not reading:
                    break
                fenced = list(reading)
                held, reply = await self._read_when_full(owner, consumer, reading, count)
                sent = []
            lost = [p for p, ok in zip(fenced, held, strict=True) if not ok]
            result.lost += [p for p in lost if p in reading]
            unacked += [p for p in lost if p in acking or p in committing]
            if reply is not None:
                if sent is None:  # the server did not know the script: sent whole now
                    sent = await self.commit(
                        owner, {p: c for p, c in committing.items() if p not in lost}
                    )
                unacked += sent
                return _add_entries(result, reply, self._partitions, skip=lost), unacked
            for p in lost:
                reading.pop(p, None)
                acking.pop(p, None)
                committing.pop(p, None)
        if committing:
            unacked += await self.commit(owner, committing)
        if acking:
            unacked += await self.ack(owner, acking)
        return result, unacked  # the fetcher reads again

    async def _checked_read(
        self,
        owner: str,
        consumer: str,
        positions: Mapping[PartitionId, bytes],
        count: int,
        acks: Mapping[PartitionId, Sequence[bytes]] | None = None,
        commits: Mapping[PartitionId, Commit] | None = None,
    ) -> tuple[list[int], Any, list[PartitionId] | None]:
        """The held flags (of the partitions read, then of those only acknowledged, then
        of those committed), XREADGROUP's reply ([] with nothing read; None when Redis
        refused the EXEC), and the partitions the commit found lost (none, unless a lock
        expired in between: the check found them ours; None when the server did not know
        the script, so that nothing of the commit applied while the rest ran).

        Any other error reply means the transaction may have run unfenced or not at all,
        so it is raised: the fetcher then reads the partitions' pending entries again,
        through the fence, and the acknowledgements and writes are sent again."""
        acks = acks or {}
        commits = commits or {}
        fenced = list(dict.fromkeys([*positions, *acks, *commits]))
        n = len(fenced)
        locks = self._locks_of(fenced)
        check = self._eval_check_locks or await self._lock_check()
        group = self._bulk(self.group)
        queued = [
            resp.header(3 + len(xids)) + _XACK + self._streams([p]) + group + resp.arguments(xids)
            for p, xids in acks.items()
        ]
        if commits:
            keys, args, count_args = commit_arguments(self, list(commits), commits, pack=True)
            packed_args = self._bulk(owner) + group + resp.bulks(args)
            queued.append(self._commit.command(keys, 2 + count_args, packed_args))
        if positions:
            queued.append(
                resp.header(7 + 2 * len(positions))
                + self._read_head
                + self._bulk(consumer)
                + resp.arguments(("COUNT", count, "STREAMS"))
                + self._streams(list(positions))
                + resp.arguments(positions.values())
            )
        packed = (
            resp.header(1 + n)
            + _WATCH
            + locks
            + resp.header(4 + n)
            + check
            + resp.arguments((n,))
            + locks
            + self._bulk(owner)
            + _MULTI
            + b"".join(queued)
            + _EXEC
        )
        replies = await self._exchange(packed, 4 + len(queued))
        if scripts.refuses_flags(replies[1]) and check == _EVAL_CHECK_LOCKS:
            # Redis 6.2: no script flags (another lane's read may have found out first)
            self._eval_check_locks = _EVAL_CHECK_LOCKS_PLAIN
            return await self._checked_read(owner, consumer, positions, count, acks, commits)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        held, executed = replies[1], replies[-1]
        if executed is None:
            return held, None, []
        lost: list[PartitionId] | None = []
        if commits:
            found = executed[len(acks)]
            if isinstance(found, NoScriptError):
                lost, executed = None, [r for r in executed if r is not found]
            elif not isinstance(found, Exception):
                partitions = list(commits)
                lost = [partitions[i - 1] for i in found]  # expired meanwhile
        for reply in executed:
            if isinstance(reply, Exception):
                raise reply  # e.g. NOGROUP, raised inside the transaction
        return held, executed[-1] if positions else [], lost

    async def _lock_check(self) -> bytes:
        """The lock check's EVAL as this server compiles it: with its flags line, or
        without on a server that knows no script flags (Redis 6.2). Asked by loading it
        before the first read: learnt from the read's own reply, it would come too late,
        the transaction after the refused check having read unfenced, leaving the entries
        it delivered pending and unseen."""
        try:
            await self.redis.script_load(scripts.CHECK_LOCKS)
            flagless = False
        except ResponseError as error:  # any other refusal: the read will say it
            flagless = scripts.refuses_flags(error)
        self._eval_check_locks = _EVAL_CHECK_LOCKS_PLAIN if flagless else _EVAL_CHECK_LOCKS
        return self._eval_check_locks

    async def _read_when_full(
        self, owner: str, consumer: str, positions: Mapping[PartitionId, bytes], count: int
    ) -> tuple[list[int], Any]:
        """The same fenced read in one script that may run on a full Redis: Redis refuses
        any command queued in a MULTI when it is at maxmemory, XREADGROUP included."""
        partitions = list(positions)
        self._streams(partitions)  # so that the reply's keys are known
        held, reply = await self._fenced_read(
            keys=[*map(self.lock_key, partitions), *map(self.key_of, partitions)],
            args=[owner, self.group, consumer, count, *positions.values()],
        )
        return held, reply or []

    async def _exchange(self, packed: bytes, replies: int) -> list[Any]:
        return await resp.exchange(self.redis, packed, replies)

    async def ack(
        self, owner: str, ids: Mapping[PartitionId, Sequence[bytes]]
    ) -> list[PartitionId]:
        """Acknowledge on the partitions whose lock we hold (FENCED_ACK_MANY), in one
        command; the partitions we no longer hold."""
        streams = list(ids)
        given: list[resp.Arg] = []
        for xids in ids.values():
            given += (len(xids), *xids)
        packed = (
            resp.header(5 + 2 * len(streams) + len(given))
            + _EVAL_FENCED_ACK_MANY
            + resp.arguments((2 * len(streams),))
            + self._locks_of(streams)
            + self._streams(streams)
            + self._bulk(owner)
            + self._bulk(self.group)
            + resp.arguments(given)
        )
        [lost] = await self._exchange(packed, 1)
        if isinstance(lost, Exception):
            raise lost
        return [streams[i - 1] for i in lost]

    async def commit(self, owner: str, commits: Mapping[PartitionId, Commit]) -> list[PartitionId]:
        """COMMIT: every partition's writes and acknowledgements in one script call."""
        partitions = list(commits)
        keys, args, count = commit_arguments(self, partitions, commits, pack=True)
        packed = resp.bulks([owner, self.group, *args])
        reply = await self._commit.packed(keys, 2 + count, packed)
        return [partitions[i - 1] for i in reply]

    def table_key(self, table: str, partition: PartitionId) -> str:
        return self.layout.table(self.app, self.stream, table, partition.number)

    def deadlines_key(self, table: str, partition: PartitionId) -> str:
        return self.layout.deadlines(self.app, self.stream, table, partition.number)

    # Quarantines.

    async def quarantine(self, partition: PartitionId, entry_id: str | None, error: str) -> None:
        record = {"id": entry_id, "error": error, "since": time.time()}
        await self.redis.hset(self.quarantine_key, str(partition.number), json.dumps(record))

    async def quarantined(self) -> dict[PartitionId, Quarantine]:
        # A hash field is a partition number, not a key: nothing is parsed out of a name.
        raw = await self.redis.hgetall(self.quarantine_key)
        out = {}
        for number, value in raw.items():
            record = json.loads(value)
            out[PartitionId(self.app, self.stream, int(number))] = Quarantine(
                id=record.get("id"), error=record.get("error", ""), since=record.get("since", 0.0)
            )
        return out

    async def lift(
        self, partitions: Sequence[PartitionId] | None, executor: str
    ) -> list[PartitionId]:
        held = await self.quarantined()
        lifted = sorted(held if partitions is None else set(partitions) & set(held))
        if lifted:
            await self.redis.hdel(self.quarantine_key, *(str(p.number) for p in lifted))
        await self.announce("resume", executor)
        return lifted


@guarded
class RedisLeadership(Leadership):
    def __init__(self, client: aioredis.Redis, app: str, layout: KeyLayout | None = None) -> None:
        self.redis = client
        self.key = (layout or Classic()).leader(app)
        self._claim = resp.Script(client, scripts.CLAIM)
        self._release = resp.Script(client, scripts.RELEASE)

    async def claim(self, candidate: str, ttl_ms: int) -> bool:
        return bool(await self._claim(keys=[self.key], args=[candidate, ttl_ms]))

    async def resign(self, candidate: str) -> None:
        await self._release(keys=[self.key], args=[candidate])

    async def leader(self) -> str | None:
        value = cast(bytes | None, await self.redis.get(self.key))  # no decode_responses: bytes
        return value.decode() if value else None


def _parse_members(raw: Any) -> Members:
    return members_from_json(json.loads(raw)) if raw else {}


def _redis_id(position: Position) -> bytes:
    """XREADGROUP's id for a position: ``>`` for new entries, else the id to read after."""
    if position.new:
        return b">"
    return b"0-0" if position.after is None else position.after


_EVAL_CHECK_LOCKS = resp.arguments(("EVAL", scripts.CHECK_LOCKS))
_EVAL_CHECK_LOCKS_PLAIN = resp.arguments(("EVAL", scripts.plain(scripts.CHECK_LOCKS)))
_EVAL_FENCED_ACK_MANY = resp.arguments(("EVAL", scripts.FENCED_ACK_MANY))
_WATCH = resp.arguments(("WATCH",))
_XACK = resp.arguments(("XACK",))
_MULTI = resp.command("MULTI")
_EXEC = resp.command("EXEC")

READ_ATTEMPTS = 3
"""Reads refused by Redis in a row before the fetcher is left to try again."""


def _add_entries(
    result: ReadResult,
    replies: Any,
    partitions: Mapping[bytes, PartitionId],
    skip: Sequence[PartitionId] = (),
) -> ReadResult:
    """Add XREADGROUP's reply to ``result``; ``partitions`` names the keys we asked for."""
    # RESP3 replies are a map, RESP2 replies a list of pairs.
    pairs = replies.items() if isinstance(replies, dict) else replies or []
    for raw_key, raw_entries in pairs:
        partition = partitions[raw_key if isinstance(raw_key, bytes) else raw_key.encode()]
        if partition in skip:
            continue  # read while nobody held its lock: left pending for the next owner
        result.entries.append(
            (
                partition,
                [
                    (xid, {flat[0]: flat[1]} if flat and len(flat) == 2 else _fields(flat))
                    for xid, flat in raw_entries or []
                ],
            )
        )
    return result


def _fields(flat: list[bytes] | None) -> dict[bytes, bytes] | None:
    """An entry's flat field/value list as a dict (None for an entry trimmed meanwhile)."""
    if not flat:
        return None
    if len(flat) == 2:  # the usual case: one `data` field
        return {flat[0]: flat[1]}
    it = iter(flat)
    return dict(zip(it, it, strict=True))
