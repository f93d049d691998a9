"""The partition logs over redis-py's synchronous client, for runnel-spark and the like.

Reads are ``XRANGE`` pages whose raw replies we walk ourselves (hiredis parses them when
installed); appends go through the APPEND script, as :meth:`RedisTransport.append` does,
so a batch is written whole or not at all in one command and one reply.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.retry import Retry

from runnel.store.identity import (
    DEFAULT_WINDOW,
    Appended,
    CallIdentity,
    Identity,
    KeyedIdentity,
    Window,
    checked,
)
from runnel.store.log import Fields, PartitionId
from runnel.store.synclog import Entries, Extent, LogError, LogFull, SyncLog, next_id
from runnel.urls import redact
from runnel_redis import resp, scripts, sentinel
from runnel_redis.identities import identity_head, identity_marks
from runnel_redis.layout import Classic, KeyLayout, layout_for

_RAW = ("XRANGE", "XREVRANGE", "XLEN")
_EVALSHA_APPEND = resp.arguments(("EVALSHA", hashlib.sha1(scripts.APPEND.encode()).hexdigest()))
_EVAL_APPEND = resp.arguments(("EVAL", scripts.APPEND))
_IDENTIFIED = scripts.APPEND_IDENTIFIED
_EVALSHA_IDENTIFIED = resp.arguments(("EVALSHA", hashlib.sha1(_IDENTIFIED.encode()).hexdigest()))
_EVAL_IDENTIFIED = resp.arguments(("EVAL", _IDENTIFIED))


class KeyedLog(SyncLog):
    """What the logs on one Redis and on a cluster share: keys by a layout, errors named
    with the redacted URL, extents from three commands per key."""

    url: str
    layout: KeyLayout
    _keys: dict[PartitionId, str]

    def _key(self, partition: PartitionId) -> str:
        key = self._keys.get(partition)
        if key is None:
            key = self._keys[partition] = self.layout.partition(*partition)
        return key

    def _failed(self, what: str, exc: Exception) -> LogError:
        return LogError(f"{redact(self.url)}: {what} failed ({type(exc).__name__}: {exc})")

    def _state_keys(self, partition: PartitionId, identity: Identity) -> list[str]:
        """A partition's identity state, as lua/append_identified.lua takes it."""
        layout = self.layout
        if isinstance(identity, CallIdentity | KeyedIdentity):
            generations = [layout.identity_keys(*partition, g) for g in (0, 1)]
            return [layout.identities(*partition), *generations]
        return [layout.identities(*partition), layout.producers(*partition)]


def extent_calls(keys: Iterable[str]) -> list[tuple[Any, ...]]:
    """The commands that give each key's :class:`Extent` (see :func:`extents_of`)."""
    calls: list[tuple[Any, ...]] = []
    for key in keys:
        calls += (
            ("XLEN", key),
            ("XRANGE", key, "-", "+", "COUNT", 1),
            ("XREVRANGE", key, "+", "-", "COUNT", 1),
        )
    return calls


def extents_of(replies: Sequence[Any]) -> list[Extent]:
    """The replies to :func:`extent_calls`, three per key, as extents."""
    out = []
    for i in range(0, len(replies), 3):
        length, first, last = replies[i : i + 3]
        out.append(Extent(int(length), _first_id(first), _first_id(last)))
    return out


class RedisLog(KeyedLog):
    """Partitions are Redis streams under ``layout``'s keys (classic unless a setting chose
    the cluster layout for a single Redis); one client per object."""

    def __init__(self, url: str, layout: KeyLayout | None = None) -> None:
        self.url = url
        self.layout = layout or Classic()
        self._redis: redis.Redis | None = None
        self._keys = {}

    def __repr__(self) -> str:
        return f"<RedisLog {redact(self.url)}>"

    @property
    def redis(self) -> redis.Redis:
        if self._redis is None:
            # No silent retries: an append whose reply was lost may have been applied, and
            # only the caller can say what to do about it.
            retry = Retry(NoBackoff(), 0)
            if sentinel.is_sentinel(self.url):  # the master the sentinels name, each connect
                client = sentinel.sync_client(self.url, retry=retry)
            else:
                client = redis.Redis.from_url(self.url, retry=retry)
            for name in _RAW:
                client.response_callbacks.pop(name, None)
            self._redis = client
        return self._redis

    def __getstate__(self) -> dict[str, Any]:
        """The URL, and the layout's name when it is not the classic one."""
        state = super().__getstate__()
        if self.layout.name != Classic.name:
            state["layout"] = self.layout.name
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        name = state.get("layout")
        self.__init__(state["url"], layout_for(state["url"], name) if name else None)  # type: ignore[misc]

    def extents(self, partitions: Sequence[PartitionId]) -> list[Extent]:
        try:
            with self.redis.pipeline(transaction=False) as pipe:
                for call in extent_calls(map(self._key, partitions)):
                    pipe.execute_command(*call)
                replies = pipe.execute()
        except RedisError as exc:
            raise self._failed("reading the extents of partitions", exc) from exc
        return extents_of(replies)

    def read(self, partition: PartitionId, first: str, last: str, count: int) -> Iterator[Entries]:
        client = self.redis
        key = self._key(partition)
        while True:
            try:
                raw = client.execute_command("XRANGE", key, first, last, "COUNT", count)
            except RedisError as exc:
                raise self._failed(f"reading {key} from {first}", exc) from exc
            if not raw:
                return
            # Runnel's entries have one field: build that dict directly.
            yield [
                (xid, {flat[0]: flat[1]} if flat and len(flat) == 2 else _fields(flat))
                for xid, flat in raw
            ]
            if len(raw) < count:
                return
            first = next_id(raw[-1][0].decode())

    def nth_ids(self, ranges: Sequence[tuple[PartitionId, str, str, int]]) -> list[str | None]:
        script = self.redis.register_script(scripts.NTH_ID)
        try:
            with self.redis.pipeline(transaction=False) as pipe:
                for partition, first, last, n in ranges:
                    script(keys=[self._key(partition)], args=[first, last, n], client=pipe)
                replies = pipe.execute()
        except RedisError as exc:
            raise self._failed("bounding reads", exc) from exc
        return [reply.decode() if reply else None for reply in replies]

    def append(
        self,
        entries: Sequence[tuple[PartitionId, Fields]],
        maxlen: int | None = None,
        drop_oldest: bool = False,
        *,
        identity: Identity | None = None,
        window: Window = DEFAULT_WINDOW,
    ) -> Appended:
        if not entries:
            return Appended()
        if identity is not None:
            identity = checked(identity, entries)
        marks = identity_marks(identity) if identity is not None else None
        streams: dict[str, int] = {}
        packed, count = resp.pack_entries([(self._key(p), f) for p, f in entries], streams, marks)
        by_key = {self._key(p): p for p, _ in entries}
        keys = list(streams)
        if drop_oldest:
            keys += [self.layout.lost(*by_key[key]) for key in streams]
        if identity is None:
            head = [maxlen if maxlen is not None else b"", b"drop" if drop_oldest else b""]
            sha, text = _EVALSHA_APPEND, _EVAL_APPEND
        else:
            for key in streams:
                keys += self._state_keys(by_key[key], identity)
            head = identity_head(maxlen, drop_oldest, len(streams), identity, window)
            sha, text = _EVALSHA_IDENTIFIED, _EVAL_IDENTIFIED
        start = resp.header(3 + len(keys) + len(head) + count)
        tail = resp.arguments((len(keys), *keys, *head)) + packed
        try:
            try:
                reply = self._exchange(start + sha + tail)
            except NoScriptError:
                reply = self._exchange(start + text + tail)
        except ResponseError as exc:
            full = full_partition(exc, list(dict.fromkeys(p for p, _ in entries)), maxlen)
            if full is None:
                raise self._failed(f"appending {len(entries)} entries", exc) from exc
            raise full from None
        except RedisError as exc:
            raise self._failed(f"appending {len(entries)} entries", exc) from exc
        if identity is None:
            return Appended(reply)
        duplicates = reply.pop()
        return Appended(reply, int(duplicates))

    def forget_producer(self, partitions: Sequence[PartitionId], producer: str) -> None:
        try:
            with self.redis.pipeline(transaction=False) as pipe:
                for partition in partitions:
                    pipe.hdel(self.layout.producers(*partition), producer)
                pipe.execute()
        except RedisError as exc:
            raise self._failed(f"forgetting producer {producer!r}", exc) from exc

    def _exchange(self, packed: bytes) -> Any:
        """One packed command on a pooled connection; a connection left in doubt is closed."""
        pool = self.redis.connection_pool
        conn = pool.get_connection()
        clean = False
        try:
            conn.send_packed_command([packed], check_health=False)
            reply = conn.read_response()
            clean = True
            return reply
        except NoScriptError:
            clean = True
            raise
        finally:
            if not clean:
                conn.disconnect()
            pool.release(conn)

    def close(self) -> None:
        if self._redis is not None:
            if sentinel.is_sentinel(self.url):
                sentinel.close(self._redis)
            else:
                self._redis.close()
            self._redis = None


def full_partition(
    reply: Exception, partitions: Sequence[PartitionId], maxlen: int | None
) -> LogFull | None:
    """The :class:`LogFull` an append script's RUNNELFULL refusal stands for, else None."""
    text = str(reply)
    if not text.startswith("RUNNELFULL ") or maxlen is None:
        return None
    _, index, group = text.split(" ", 2)
    partition = partitions[int(index) - 1]
    return LogFull(
        f"partition {partition.number} of stream {partition.stream!r} is full "
        f"(partition_size {maxlen}) with entries processor {group!r} has not acknowledged; "
        "nothing of this chunk was appended",
        partition,
        group,
    )


def _fields(flat: list[bytes] | None) -> dict[bytes, bytes]:
    it = iter(flat or ())  # a trimmed entry has no fields
    return dict(zip(it, it, strict=True))


def _first_id(reply: Any) -> str | None:
    return reply[0][0].decode() if reply else None
