"""The Redis Streams transport: XADD, XREADGROUP and XACK over redis-py's asyncio client."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ResponseError

from runnel.exceptions import EntryIdError, PartitionFull
from runnel.store.backend import Backend
from runnel.store.identity import (
    DEFAULT_WINDOW,
    Appended,
    CallIdentity,
    Identity,
    KeyedIdentity,
    Window,
    checked,
)
from runnel.store.log import Fields, Log, LogAdmin, PartitionId
from runnel.store.synclog import SyncLog
from runnel.urls import redact
from runnel_redis import errors, pool, resp, scripts, sentinel
from runnel_redis.coordination import RedisCoordination, RedisLeadership
from runnel_redis.identities import identity_head, identity_marks, remembered_counts
from runnel_redis.layout import Classic, KeyLayout
from runnel_redis.replicas import check_replicated
from runnel_redis.schemas import RedisSchemaStore
from runnel_redis.seam import guarded
from runnel_redis.synclog import RedisLog
from runnel_redis.tables import RedisTableStore

if TYPE_CHECKING:
    from runnel_redis.jobs import RedisJobStore

# Replies we parse ourselves: redis-py's parser turns entries into dicts through a path
# that cannot represent a trimmed entry, and the raw reply is cheaper to walk.
_RAW_REPLIES = ("XREADGROUP", "XAUTOCLAIM", "XREAD")
_START = b"0-0"  # Redis's id before every entry


@guarded
class RedisTransport(Backend, Log, LogAdmin):
    """Partitions are Redis streams; consumer groups are named after processors. One
    object plays the log and admin roles and makes the others over the same client."""

    def __init__(
        self,
        url: str,
        *,
        layout: KeyLayout | None = None,
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
        max_connections: int = pool.DEFAULT_MAX_CONNECTIONS,
        **client_options: Any,
    ) -> None:
        self.url = url
        self.max_connections = max_connections
        self.layout = self._checked_layout(layout)
        self.key_layout = self.layout.name
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = max(1, int(wait_timeout * 1000))
        self._keys: dict[PartitionId, str] = {}
        self._partitions: dict[str, PartitionId] = {}
        """The partition of each key :meth:`partition_key` gave (the same names)."""
        self._client: Any = None
        self._ensure_group: resp.Script | None = None
        self._append: resp.Script | None = None
        self._append_at: resp.Script | None = None
        self._identified: resp.Script | None = None
        self._state_keys: dict[tuple[PartitionId, bool], list[str]] = {}
        self.redis = self._connect(client_options)
        self.log = self

    def admin(self) -> LogAdmin:
        return self

    def _checked_layout(self, layout: KeyLayout | None) -> KeyLayout:
        return layout or Classic()

    def _connect(self, client_options: dict[str, Any]) -> aioredis.Redis:
        """The client every call goes through."""
        # No silent retries inside the client: a command whose reply was lost may have
        # taken effect (an XREADGROUP that delivered entries), and only the caller knows
        # how to recover from that. Runnel's loops retry with backoff themselves.
        client_options.setdefault("retry", Retry(NoBackoff(), 0))
        # Refusals (a wrong password, a missing permission, a full Redis) become Runnel's
        # own exceptions, naming the user but never the password.
        client_options.setdefault("parser_class", errors.parser_class(self.url))
        # More calls at once than connections wait for one (runnel_redis.pool).
        client = _client(self.url, self.max_connections, decode_responses=False, **client_options)
        for name in _RAW_REPLIES:
            client.response_callbacks.pop(name, None)
        return client

    def __repr__(self) -> str:
        return f"<RedisTransport {redact(self.url)}>"

    def partition_key(self, partition: PartitionId) -> str:
        key = self._keys.get(partition)
        if key is None:
            key = self._keys[partition] = self.layout.partition(*partition)
            self._partitions[key] = partition
        return key

    def lost_key(self, partition: PartitionId) -> str:
        return self.layout.lost(*partition)

    async def append(
        self,
        entries: Sequence[tuple[PartitionId, Fields]],
        maxlen: int | None = None,
        ids: Sequence[str] | None = None,
        drop_oldest: bool = False,
        *,
        identity: Identity | None = None,
        window: Window = DEFAULT_WINDOW,
    ) -> Appended:
        """One script call (lua/append.lua): the batch is appended whole or not at all, in
        one command and one reply, each partition held to ``maxlen`` (lua/room.lua).
        With an identity, lua/append_identified.lua, which keeps each partition's
        identity state beside it (lua/identities.lua)."""
        if identity is not None:
            identity = checked(identity, entries, ids)
            return await self._append_identified(entries, maxlen, drop_oldest, identity, window)
        key_of = self.partition_key
        streams: dict[str, int] = {}
        body, count = resp.pack_entries(((key_of(p), f) for p, f in entries), streams, ids)
        head: list[Any] = [maxlen if maxlen is not None else b"", b"drop" if drop_oldest else b""]
        if ids is not None:
            head += _first_ids(streams, [key_of(p) for p, _ in entries], ids)
        keys = list(streams)
        if drop_oldest:
            parts = {key_of(p): p for p, _ in entries}
            keys += [self.lost_key(parts[key]) for key in streams]
        script = self._append_at if ids is not None else self._append
        if script is None:
            script = resp.Script(self.redis, scripts.APPEND_AT if ids else scripts.APPEND)
            if ids is not None:
                self._append_at = script
            else:
                self._append = script
        wait = b""
        if self.wait_replicas:
            wait = resp.command("WAIT", self.wait_replicas, self.wait_timeout_ms)
        replies = await script.exchange(
            keys, len(head) + count, resp.arguments(head) + body, wait, 1 if wait else 0
        )
        added = replies[0]
        if isinstance(added, ResponseError):
            raise self._refused(added, entries, maxlen)
        if wait:
            check_replicated(int(replies[1]), self.wait_replicas, self.wait_timeout_ms)
        return Appended(added)

    async def _append_identified(
        self,
        entries: Sequence[tuple[PartitionId, Fields]],
        maxlen: int | None,
        drop_oldest: bool,
        identity: Identity,
        window: Window,
    ) -> Appended:
        key_of = self.partition_key
        streams: dict[str, int] = {}
        body, count = resp.pack_entries(
            ((key_of(p), f) for p, f in entries), streams, identity_marks(identity)
        )
        parts = self._partitions
        keys = list(streams)
        if drop_oldest:
            keys += [self.lost_key(parts[key]) for key in streams]
        sequenced = not isinstance(identity, CallIdentity | KeyedIdentity)
        for key in streams:
            keys += self.state_keys(parts[key], sequenced)
        head = identity_head(maxlen, drop_oldest, len(streams), identity, window)
        script = self._identified
        if script is None:
            script = self._identified = resp.Script(self.redis, scripts.APPEND_IDENTIFIED)
        wait = b""
        if self.wait_replicas:
            wait = resp.command("WAIT", self.wait_replicas, self.wait_timeout_ms)
        replies = await script.exchange(
            keys, len(head) + count, resp.arguments(head) + body, wait, 1 if wait else 0
        )
        added = replies[0]
        if isinstance(added, ResponseError):
            raise self._refused(added, entries, maxlen)
        if wait:
            check_replicated(int(replies[1]), self.wait_replicas, self.wait_timeout_ms)
        duplicates = added.pop()
        return Appended(added, int(duplicates))

    def state_keys(self, partition: PartitionId, sequenced: bool) -> list[str]:
        """A partition's identity state (lua/identities.lua): its meta hash, then its
        two generations, or (``sequenced``) its producers."""
        found = self._state_keys.get((partition, sequenced))
        if found is None:
            layout = self.layout
            found = [layout.identities(*partition)]
            if sequenced:
                found.append(layout.producers(*partition))
            else:
                found += [layout.identity_keys(*partition, g) for g in (0, 1)]
            self._state_keys[(partition, sequenced)] = found
        return found

    async def forget_producer(self, partitions: Sequence[PartitionId], producer: str) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            for partition in partitions:
                pipe.hdel(self.layout.producers(*partition), producer)
            await pipe.execute()

    async def duplicates(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        async with self.redis.pipeline(transaction=False) as pipe:
            for partition in partitions:
                pipe.hget(self.layout.identities(*partition), "d")
            counts = await pipe.execute()
        return {p: int(n or 0) for p, n in zip(partitions, counts, strict=True)}

    async def remembered(
        self, partitions: Sequence[PartitionId]
    ) -> dict[PartitionId, tuple[int, int]]:
        layout = self.layout
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.time()
            for partition in partitions:
                pipe.hlen(layout.identity_keys(*partition, 0))
                pipe.hlen(layout.identity_keys(*partition, 1))
                pipe.hgetall(layout.producers(*partition))
            replies = await pipe.execute()
        return remembered_counts(partitions, replies)

    def _refused(
        self, reply: ResponseError, entries: Sequence[tuple[PartitionId, Fields]], maxlen: Any
    ) -> Exception:
        """The Runnel error for an append script's refusal (nothing was appended)."""
        text = str(reply)
        if text.startswith("IDORDER"):
            return EntryIdError(text.removeprefix("IDORDER "))
        if text.startswith("RUNNELFULL "):
            _, index, group = text.split(" ", 2)
            order = list(dict.fromkeys(p for p, _ in entries))
            return partition_full(order[int(index) - 1], group, int(maxlen), len(entries))
        return reply

    async def ensure_group(self, partitions: Sequence[PartitionId], group: str) -> None:
        # A script: XGROUP CREATE is refused on a full Redis even when the group exists.
        if self._ensure_group is None:
            self._ensure_group = resp.Script(self.redis, scripts.ENSURE_GROUP)
        await self._ensure_group(keys=[self.partition_key(p) for p in partitions], args=[group])

    async def adopt_pending(self, partition: PartitionId, group: str, consumer: str) -> int:
        key = self.partition_key(partition)
        summary = await self.redis.xpending(key, group)
        others = sum(
            int(c["pending"])
            for c in summary.get("consumers") or []
            if _text(c["name"]) != consumer
        )
        if not others:
            return 0
        cursor: Any = b"0-0"
        while True:
            reply = await self.redis.execute_command(
                "XAUTOCLAIM", key, group, consumer, 0, cursor, "COUNT", 1000, "JUSTID"
            )
            cursor = reply[0]
            if cursor in (b"0-0", "0-0"):
                return others

    async def last_delivered(
        self, partitions: Sequence[PartitionId], group: str
    ) -> dict[PartitionId, bytes]:
        async with self.redis.pipeline(transaction=False) as pipe:
            for partition in partitions:
                pipe.xinfo_groups(self.partition_key(partition))
            replies = await pipe.execute(raise_on_error=False)
        out = {}
        for partition, groups in zip(partitions, replies, strict=True):
            if isinstance(groups, ResponseError) and "no such key" in str(groups):
                continue  # no partition yet, so no group on it: left out, as one without
            if isinstance(groups, Exception):
                raise groups
            for info in groups:
                if _text(info["name"]) == group:
                    out[partition] = info["last-delivered-id"]
        return out

    async def wait_for_new(self, after: Mapping[PartitionId, bytes | None], block_ms: int) -> bool:
        reply = await self.redis.execute_command(
            "XREAD",
            "COUNT",
            1,
            "BLOCK",
            block_ms,
            "STREAMS",
            *map(self.partition_key, after.keys()),
            *(_START if xid is None else xid for xid in after.values()),
        )
        return bool(reply)

    async def ack(self, partition: PartitionId, group: str, ids: Sequence[bytes]) -> None:
        if ids:
            await self.redis.execute_command("XACK", self.partition_key(partition), group, *ids)

    async def reset_group(self, partitions: Sequence[PartitionId], group: str, start: str) -> None:
        for key in map(self.partition_key, partitions):
            try:
                await self.redis.xgroup_create(key, group, id=start, mkstream=True)
                continue
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
            # The group exists: move it (this checks the id before changing anything),
            # then acknowledge what it had pending, so nothing old is delivered again.
            await self.redis.xgroup_setid(key, group, id=start)
            while True:
                pending = await self.redis.xpending_range(key, group, min="-", max="+", count=1000)
                if not pending:
                    break
                await self.redis.xack(key, group, *[p["message_id"] for p in pending])

    def client(self) -> aioredis.Redis:
        """A plain redis-py asyncio client for the app's URL (``App.redis``), kept apart
        from Runnel's own, whose replies are left raw for speed."""
        if self._client is None:
            self._client = _client(self.url, self.max_connections)
        return self._client

    async def aclose(self) -> None:
        await self.redis.aclose()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def backlog(
        self, partitions: Sequence[PartitionId], group: str
    ) -> dict[PartitionId, tuple[int | None, int]]:
        keys = [self.partition_key(p) for p in partitions]
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.exists(key)
            exists = await pipe.execute()
        out: dict[PartitionId, tuple[int | None, int]] = {}
        for partition, key, present in zip(partitions, keys, exists, strict=True):
            if not present:
                out[partition] = (0, 0)
                continue
            info = next(
                (g for g in await self.redis.xinfo_groups(key) if _text(g["name"]) == group), None
            )
            if info is None:
                out[partition] = (await self.redis.xlen(key), 0)
                continue
            lag = info.get("lag")  # Redis 7 and later
            if lag is None:
                # Redis 6.2: count what lies after the last delivered id, up to a limit.
                after = b"(" + info["last-delivered-id"]
                lag = len(
                    cast(list[Any], await self.redis.xrange(key, min=after, max="+", count=10_001))
                )
            out[partition] = (int(lag), int(info["pending"]))
        return out

    async def lost(self, partitions: Sequence[PartitionId], group: str) -> dict[PartitionId, int]:
        async with self.redis.pipeline(transaction=False) as pipe:
            for partition in partitions:
                pipe.hget(self.lost_key(partition), group)
            counts = await pipe.execute()
        return {p: int(n or 0) for p, n in zip(partitions, counts, strict=True)}

    async def count_lost(self, partition: PartitionId, group: str, count: int) -> None:
        if count:
            await self.redis.hincrby(self.lost_key(partition), group, count)

    async def first_pending(self, partition: PartitionId, group: str) -> bytes | None:
        key = self.partition_key(partition)
        try:
            rows = await self.redis.xpending_range(key, group, min="-", max="+", count=1)
        except ResponseError as exc:
            if "NOGROUP" in str(exc):
                return None
            raise
        return cast(bytes, rows[0]["message_id"]) if rows else None  # replies are bytes

    async def scan(
        self, partition: PartitionId, after: bytes | None, count: int
    ) -> list[tuple[bytes, dict[bytes, bytes]]]:
        start = b"-" if after is None or after == _START else b"(" + after
        # redis-py types replies as bytes | str; this client (no decode_responses) gives bytes.
        entries = await self.redis.xrange(
            self.partition_key(partition), min=start, max="+", count=count
        )
        return list(cast(list[tuple[bytes, dict[bytes, bytes]]], entries))

    async def remove(self, partition: PartitionId, ids: Sequence[bytes]) -> int:
        return int(await self.redis.xdel(self.partition_key(partition), *ids)) if ids else 0

    async def lengths(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        async with self.redis.pipeline(transaction=False) as pipe:
            for partition in partitions:
                pipe.xlen(self.partition_key(partition))
            counts = await pipe.execute()
        return {p: int(n) for p, n in zip(partitions, counts, strict=True)}

    async def appended(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int | None]:
        # XINFO STREAM's entries-added (Redis 7 and later): XTRIM and XDEL leave it alone.
        async with self.redis.pipeline(transaction=False) as pipe:
            for partition in partitions:
                pipe.xinfo_stream(self.partition_key(partition))
            replies = await pipe.execute(raise_on_error=False)
        out: dict[PartitionId, int | None] = {}
        for partition, reply in zip(partitions, replies, strict=True):
            if isinstance(reply, ResponseError) and "no such key" in str(reply).lower():
                out[partition] = 0  # never written (or deleted: counted again from 0)
            elif isinstance(reply, Exception):
                raise reply
            else:
                added = reply.get("entries-added")
                out[partition] = None if added is None else int(added)
        return out

    def coordination(self, app: str, stream: str, processor: str) -> RedisCoordination:
        return RedisCoordination(
            self.redis,
            app,
            stream,
            processor,
            group=processor,
            key_of=self.partition_key,
            layout=self.layout,
        )

    def leadership(self, app: str) -> RedisLeadership:
        return RedisLeadership(self.redis, app, self.layout)

    def job_store(self, app: str) -> RedisJobStore:
        # Here: the job queue's store and models are a fifth of a worker's start-up
        # imports, which a worker of streams alone never uses.
        from runnel_redis.jobs import RedisJobStore

        store = RedisJobStore(self.redis, app, self.layout)
        store.wait_replicas, store.wait_timeout_ms = self.wait_replicas, self.wait_timeout_ms
        return store

    def table_store(self, app: str) -> RedisTableStore:
        return RedisTableStore(self.redis, self.layout, app)

    def schema_store(self, app: str, stream: str) -> RedisSchemaStore:
        return RedisSchemaStore(self.redis, app, stream, self.layout)

    def sync_log(self) -> SyncLog:
        return RedisLog(self.url, self.layout)


def _client(url: str, max_connections: int, **options: Any) -> aioredis.Redis:
    """The client of one Redis, or of the master the sentinels name (``redis+sentinel://``)."""
    if sentinel.is_sentinel(url):
        return sentinel.async_client(url, max_connections, **options)
    return pool.client(url, max_connections, **options)


def _first_ids(streams: Mapping[str, int], keys: Sequence[str], ids: Sequence[str]) -> list[str]:
    """lua/append_at.lua's first explicit id per stream (empty if none)."""
    firsts = [""] * len(streams)
    for key, entry_id in zip(keys, ids, strict=True):
        index = streams[key] - 1
        if entry_id != "*" and not firsts[index]:
            firsts[index] = entry_id
    return firsts


def partition_full(partition: PartitionId, group: str, maxlen: int, count: int) -> PartitionFull:
    return PartitionFull(
        f"partition {partition.number} of stream {partition.stream!r} is full "
        f"(partition_size {maxlen}) with entries processor {group!r} has not acknowledged",
        [None] * count,
        partition.stream,
        partition.number,
        group,
        maxlen,
    )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
