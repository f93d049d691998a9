"""The transport on a Redis Cluster (``redis+cluster://``), over redis-py's ``RedisCluster``.

Every atomic step of the single-Redis transport stays atomic, but only within one slot:
the cluster key layout (:class:`runnel_redis.layout.Cluster`) puts a partition's stream
and its locks in one slot, and a processor's membership, control stream, heartbeats and
quarantine in another. So what the single-Redis transport does in one script over many
partitions is done here with one script per partition; those calls go out as one
pipeline, which redis-py splits by node and sends to the nodes in parallel, following
MOVED and ASK for each call. docs/cluster.md says what works and what does not yet.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisError

from runnel.exceptions import Misconfigured
from runnel.store.coordination import Coordination, ReadResult
from runnel.store.identity import (
    DEFAULT_WINDOW,
    Appended,
    Identity,
    Window,
)
from runnel.store.log import Fields, PartitionId, Position
from runnel.store.state import Commit
from runnel.store.synclog import SyncLog
from runnel.urls import redact
from runnel_redis import cluster_sends, scripts
from runnel_redis.cluster_calls import (
    ClusterScript,
)
from runnel_redis.cluster_calls import (
    eval_call as _eval,
)
from runnel_redis.cluster_calls import (
    pairs as _pairs,
)
from runnel_redis.cluster_calls import (
    pipelined as _pipelined,
)
from runnel_redis.cluster_calls import (
    raise_first as _raise_first,
)
from runnel_redis.cluster_calls import (
    then_wait as _then_wait,
)
from runnel_redis.cluster_log import ClusterLog
from runnel_redis.cluster_stores import ClusterJobStore, ClusterSchemaStore
from runnel_redis.commits import CAP, RELAYED, TARGET, commit_arguments
from runnel_redis.coordination import (
    RedisCoordination,
    RedisLeadership,
    _add_entries,
    _redis_id,
)
from runnel_redis.identities import remembered_counts
from runnel_redis.layout import Cluster, KeyLayout
from runnel_redis.pool import WaitingCluster
from runnel_redis.seam import guarded
from runnel_redis.transport import (
    _RAW_REPLIES,
    RedisTransport,
)
from runnel_redis.urls import client_url
from runnel_redis.watch import Watch

RELAY_PAGE = 500
"""Outbox entries relayed per round trip."""

_POLL = 0.02
"""Seconds between the non-blocking looks of :meth:`RedisClusterTransport.wait_for_new`
when it watches more partitions than :data:`MAX_BLOCKING`."""

MAX_BLOCKING = 64
"""Partitions one wait watches with a blocking read each (a connection each); a wait
over more looks every :data:`_POLL` seconds instead."""

_WATCH_CONNECTIONS = 1024
"""Connections per node for blocking reads (their own client, so that they never take
the connections the other calls need); a bound, not a pool kept open."""


@guarded
class RedisClusterTransport(RedisTransport):
    """Partitions are streams spread over the cluster's masters by their hash tags."""

    def _checked_layout(self, layout: KeyLayout | None) -> KeyLayout:
        layout = layout or Cluster()
        if not isinstance(layout, Cluster):
            raise Misconfigured(
                f"a Redis Cluster needs the cluster key layout, not {layout.name!r} "
                "(redis_key_layout)"
            )
        return layout

    def _connect(self, client_options: dict[str, Any]) -> aioredis.Redis:
        """The cluster client; the inherited single-key operations call redis-py
        commands that both clients have."""
        # The cluster client keeps its own retries: they are how it follows a failover
        # (a connection error, then a refreshed slot map). At least once still holds:
        # an entry a retried read delivered twice stays pending and is read again.
        self._client_options = client_options
        self._watch: Watch | None = None
        self.cluster = self._new_client()
        return cast(Any, self.cluster)

    def _new_client(self, **options: Any) -> RedisCluster:
        options = {"max_connections": self.max_connections, **self._client_options, **options}
        client = WaitingCluster.from_url(client_url(self.url), decode_responses=False, **options)
        for name in _RAW_REPLIES:
            client.response_callbacks.pop(name, None)
        return client

    def __repr__(self) -> str:
        return f"<RedisClusterTransport {redact(self.url)}>"

    def node_of(self, key: str) -> ClusterNode:
        node = self.cluster.get_node_from_key(key)
        if node is None:
            raise ConnectionError(
                f"no master known for {key} (the cluster's slot map is incomplete)"
            )
        return node

    def _where(self, key: str) -> str:
        """``key`` and the master the client's slot map gives it, for error messages."""
        try:
            node = self.cluster.get_node_from_key(key)
        except RedisError:  # the slot is not covered (a failover under way)
            node = None
        return key if node is None else f"{key} on master {node.name}"

    # Sending.

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
        """One append script per partition (its entries in order, whole or not at all,
        held to ``maxlen``: lua/room.lua; with an identity, checked and kept with them:
        lua/append_identified.lua), all of them in one pipeline; then WAIT on each master
        written to (:mod:`runnel_redis.cluster_sends`)."""
        return await cluster_sends.append(self, entries, maxlen, ids, drop_oldest, identity, window)

    async def forget_producer(self, partitions: Sequence[PartitionId], producer: str) -> None:
        calls = [("HDEL", self.layout.producers(*p), producer) for p in partitions]
        _raise_first(await _pipelined(self.cluster, calls))

    async def duplicates(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        calls = [("HGET", self.layout.identities(*p), "d") for p in partitions]
        replies = await _pipelined(self.cluster, calls)
        _raise_first(replies)
        return {p: int(n or 0) for p, n in zip(partitions, replies, strict=True)}

    async def remembered(
        self, partitions: Sequence[PartitionId]
    ) -> dict[PartitionId, tuple[int, int]]:
        """As on one Redis, each partition's reads and the clock on its own master."""
        out = {}
        for partition in partitions:
            calls: list[tuple[Any, ...]] = [
                ("TIME", {"target_nodes": self.node_of(self.partition_key(partition))}),
                ("HLEN", self.layout.identity_keys(*partition, 0)),
                ("HLEN", self.layout.identity_keys(*partition, 1)),
                ("HGETALL", self.layout.producers(*partition)),
            ]
            await self.cluster.initialize()
            replies = await _pipelined(self.cluster, calls)
            _raise_first(replies)
            replies[3] = _pairs(tuple(replies[3])) if isinstance(replies[3], list) else replies[3]
            out.update(remembered_counts([partition], replies))
        return out

    async def _append_and_wait(
        self, calls: Sequence[tuple[Any, ...]], keys: Sequence[str]
    ) -> tuple[list[Any], dict[str, int]]:
        """The appends, and WAIT after each node's appends on the same connection (one
        pipeline per node: WAIT counts the replicas holding that connection's writes)."""
        await self.cluster.initialize()  # the slot map, on first use (then a no-op)
        by_node: dict[str, tuple[ClusterNode, list[int]]] = {}
        for n, key in enumerate(keys):
            node = self.node_of(key)
            by_node.setdefault(node.name, (node, []))[1].append(n)
        replies: list[Any] = [None] * len(calls)
        acked: dict[str, int] = {}

        async def one(node: ClusterNode, members: list[int]) -> None:
            got, acked[node.name] = await _then_wait(
                self.cluster,
                node,
                [calls[n] for n in members],
                self.wait_replicas,
                self.wait_timeout_ms,
            )
            for n, reply in zip(members, got, strict=True):
                replies[n] = reply

        await asyncio.gather(*(one(node, members) for node, members in by_node.values()))
        return replies, acked

    async def ensure_group(self, partitions: Sequence[PartitionId], group: str) -> None:
        calls = [_eval(scripts.ENSURE_GROUP, [self.partition_key(p)], [group]) for p in partitions]
        _raise_first(await _pipelined(self.cluster, calls))

    async def wait_for_new(self, after: Mapping[PartitionId, bytes | None], block_ms: int) -> bool:
        """Whether any partition has entries after the given ids within ``block_ms``: a
        blocking read per partition (:mod:`runnel_redis.watch`), on connections of their
        own; over more than :data:`MAX_BLOCKING` partitions, a look every few ms."""
        looks = {self.partition_key(p): b"0-0" if xid is None else xid for p, xid in after.items()}
        if len(looks) <= MAX_BLOCKING:
            if self._watch is None:
                self._watch = Watch(self._new_client(max_connections=_WATCH_CONNECTIONS))
            return await self._watch.wait(looks, block_ms)
        deadline = time.monotonic() + block_ms / 1000
        while True:
            await self.cluster.initialize()
            calls = [
                ("XREAD", "COUNT", 1, "STREAMS", key, xid, {"target_nodes": self.node_of(key)})
                for key, xid in looks.items()
            ]
            replies = await _pipelined(self.cluster, calls)
            _raise_first(replies)
            if any(replies):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(_POLL, left))

    async def aclose(self) -> None:
        if self._watch is not None:
            await self._watch.aclose()
            self._watch = None
        await super().aclose()

    def client(self) -> Any:
        """A plain redis-py cluster client for the app's URL (``App.redis``)."""
        if self._client is None:
            self._client = WaitingCluster.from_url(
                client_url(self.url), max_connections=self.max_connections
            )
        return cast(RedisCluster, self._client)

    # The stores.

    def coordination(self, app: str, stream: str, processor: str) -> ClusterCoordination:
        return ClusterCoordination(
            self.redis,
            app,
            stream,
            processor,
            group=processor,
            key_of=self.partition_key,
            layout=self.layout,
        )

    def leadership(self, app: str) -> RedisLeadership:
        lead = RedisLeadership(self.redis, app, self.layout)
        lead._claim = ClusterScript(self.cluster, scripts.CLAIM)  # type: ignore[assignment]
        lead._release = ClusterScript(self.cluster, scripts.RELEASE)  # type: ignore[assignment]
        return lead

    def job_store(self, app: str) -> ClusterJobStore:
        store = ClusterJobStore(self.redis, app, self.layout)
        store.wait_replicas, store.wait_timeout_ms = self.wait_replicas, self.wait_timeout_ms
        return store

    def schema_store(self, app: str, stream: str) -> ClusterSchemaStore:
        return ClusterSchemaStore(self.redis, app, stream, self.layout)

    def sync_log(self) -> SyncLog:
        """The partition logs for Spark: keys by the cluster layout, one append script
        per partition, WAIT as for sends (see :mod:`runnel_redis.cluster_log`)."""
        return ClusterLog(self.url, self.wait_replicas, self.wait_timeout_ms)


@guarded
class ClusterCoordination(RedisCoordination):
    """Locks, fenced reads and acknowledgements one partition (one slot) per script call,
    all calls of one operation in one pipeline."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        client = cast(RedisCluster, self.redis)
        for name, text in (
            ("_acquire", scripts.ACQUIRE),
            ("_release", scripts.RELEASE),
            ("_take", scripts.TAKE),
            ("_announce", scripts.ANNOUNCE),
        ):
            setattr(self, name, ClusterScript(client, text))
        self._cluster = client

    async def _each(
        self, text: str, partitions: Sequence[PartitionId], args_of: Any, with_stream: bool
    ) -> list[Any]:
        calls = []
        for p in partitions:
            keys = [self.lock_key(p), self.key_of(p)] if with_stream else [self.lock_key(p)]
            calls.append(_eval(text, keys, args_of(p)))
        return await _pipelined(self._cluster, calls)

    async def acquire(
        self, owner: str, partitions: Sequence[PartitionId], ttl_ms: int
    ) -> set[PartitionId]:
        replies = await self._each(scripts.ACQUIRE, partitions, lambda p: [owner, ttl_ms], False)
        _raise_first(replies)
        return {p for p, got in zip(partitions, replies, strict=True) if got and got[0]}

    async def release(self, owner: str, partitions: Sequence[PartitionId]) -> None:
        _raise_first(await self._each(scripts.RELEASE, partitions, lambda p: [owner], False))

    async def beat(
        self, owner: str, partitions: Sequence[PartitionId], ttl_ms: int
    ) -> set[PartitionId]:
        """The heartbeat (the processor's slot), then each lock still ours extended (its
        partition's slot): BEAT's two halves, in one pipeline."""
        calls: list[tuple[Any, ...]] = [
            _eval(scripts.HEARTBEAT, [self.heartbeat_key(owner)], [owner, ttl_ms]),
            *(_eval(scripts.EXTEND, [self.lock_key(p)], [owner, ttl_ms]) for p in partitions),
        ]
        replies = await _pipelined(self._cluster, calls)
        _raise_first(replies)
        return {p for p, ok in zip(partitions, replies[1:], strict=True) if ok}

    async def lock_owners(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, str | None]:
        replies = await _pipelined(self._cluster, [("GET", self.lock_key(p)) for p in partitions])
        _raise_first(replies)
        return {p: (v.decode() if v else None) for p, v in zip(partitions, replies, strict=True)}

    async def read(
        self, owner: str, consumer: str, positions: Mapping[PartitionId, Position], count: int
    ) -> ReadResult:
        """FENCED_READ per partition (lock and stream share a slot), one pipeline."""
        partitions = list(positions)
        self._streams(partitions)  # so that the reply's keys are known
        replies = await self._each(
            scripts.FENCED_READ,
            partitions,
            lambda p: [owner, self.group, consumer, count, _redis_id(positions[p])],
            True,
        )
        _raise_first(replies)
        result = ReadResult()
        for partition, (held, reply) in zip(partitions, replies, strict=True):
            if not held[0]:
                result.lost.append(partition)
            elif reply:
                _add_entries(result, reply, self._partitions)
        return result

    async def read_and_ack(
        self,
        owner: str,
        consumer: str,
        positions: Mapping[PartitionId, Position],
        count: int,
        ids: Mapping[PartitionId, Sequence[bytes]],
    ) -> tuple[ReadResult, list[PartitionId]]:
        """:meth:`ack`, then :meth:`read`: a transaction cannot span slots, and each
        script call here fences its own partition already."""
        return await Coordination.read_and_ack(self, owner, consumer, positions, count, ids)

    commits_ride = False  # the commit and the read go to their slots one after the other

    async def read_and_commit(
        self,
        owner: str,
        consumer: str,
        positions: Mapping[PartitionId, Position],
        count: int,
        commits: Mapping[PartitionId, Commit],
    ) -> tuple[ReadResult, list[PartitionId]]:
        """:meth:`commit`, then :meth:`read` (see :meth:`read_and_ack`)."""
        return await Coordination.read_and_commit(self, owner, consumer, positions, count, commits)

    async def ack(
        self, owner: str, ids: Mapping[PartitionId, Sequence[bytes]]
    ) -> list[PartitionId]:
        """FENCED_ACK_MANY per partition, one pipeline; the partitions we no longer hold."""
        partitions = list(ids)
        replies = await self._each(
            scripts.FENCED_ACK_MANY,
            partitions,
            lambda p: [owner, self.group, len(ids[p]), *ids[p]],
            True,
        )
        _raise_first(replies)
        return [p for p, lost in zip(partitions, replies, strict=True) if lost]

    async def commit(self, owner: str, commits: Mapping[PartitionId, Commit]) -> list[PartitionId]:
        """COMMIT per partition (its lock, stream, tables and outbox share its slot), one
        pipeline. Outputs go to the partition's outbox; :meth:`relay` delivers them."""
        partitions = list(commits)
        calls = []
        for p in partitions:
            keys, args, _ = commit_arguments(self, [p], commits, self.outbox_key)
            calls.append(_eval(scripts.COMMIT, keys, [owner, self.group, *args]))
        replies = await _pipelined(self._cluster, calls)
        _raise_first(replies)
        return [p for p, lost in zip(partitions, replies, strict=True) if lost]

    def outbox_key(self, partition: PartitionId) -> str:
        return self.layout.outbox(*partition)

    async def relay(self, partitions: Sequence[PartitionId]) -> int:
        """Each partition's outbox to the streams its entries go to (RELAY, in their
        slots: each appended once), then deleted from the outbox; a page at a time."""
        if not partitions:
            return 0
        looks = [("XRANGE", self.outbox_key(p), "-", "+", "COUNT", RELAY_PAGE) for p in partitions]
        replies = await _pipelined(self._cluster, looks)
        _raise_first(replies)
        appended = 0
        for p, reply in zip(partitions, replies, strict=True):
            while reply:
                appended += await self._relay_page(self.outbox_key(p), reply)
                if len(reply) < RELAY_PAGE:
                    break
                reply = await self._cluster.execute_command(
                    "XRANGE", self.outbox_key(p), "-", "+", "COUNT", RELAY_PAGE
                )
        return appended

    async def _relay_page(self, outbox: str, entries: Sequence[Any]) -> int:
        by_stream: dict[bytes, tuple[bytes, bytes, list[Any]]] = {}
        for xid, found in entries:
            fields = dict(found) if isinstance(found, dict) else _pairs(found)
            stream, relayed, cap = fields.pop(TARGET), fields.pop(RELAYED), fields.pop(CAP)
            args = by_stream.setdefault(stream, (relayed, cap, []))[2]
            args += (xid, len(fields))
            for item in fields.items():
                args += item
        calls = [
            _eval(scripts.RELAY, [stream, relayed], [outbox, cap, *args])
            for stream, (relayed, cap, args) in by_stream.items()
        ]
        replies = await _pipelined(self._cluster, calls)
        _raise_first(replies)
        await self._cluster.execute_command("XDEL", outbox, *[xid for xid, _ in entries])
        return sum(int(n) for n in replies)
