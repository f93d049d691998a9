"""The partition logs on a Redis Cluster, over redis-py's synchronous ``RedisCluster``.

Keys are the cluster layout's, so a partition's stream is in one slot. Lengths, bounds and
reads go one key per command, pipelined (redis-py splits a pipeline by node). An append is
one APPEND script call per partition (whole or not at all, in order), all of them in one
pipeline: a chunk over several partitions is therefore no longer all or none, and when a
part fails, :class:`PartlyAppended` says which partitions' parts are in the store.

With the transport's ``wait_replicas``, each master's appends are followed by ``WAIT``
on the same connection, and too few replicas raise
:class:`runnel.exceptions.NotReplicated` as a send does.

The cluster client keeps its retries (they follow MOVED, ASK and failovers), and sends
again a command whose reply was lost: an append without an identity may then be applied
twice, which at-least-once delivery allows; one with an identity is recognised by the
partition, which appends it once (runnel.store.identity).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from redis.cluster import RedisCluster
from redis.exceptions import ResponseError

from runnel.store.identity import DEFAULT_WINDOW, Appended, Identity, Window, checked
from runnel.store.log import Fields, PartitionId
from runnel.store.synclog import Entries, Extent, PartlyAppended, next_id
from runnel.text import plural
from runnel.urls import redact
from runnel_redis import scripts
from runnel_redis.identities import identity_head, identity_marks
from runnel_redis.layout import Cluster
from runnel_redis.replicas import check_replicated
from runnel_redis.synclog import KeyedLog, extent_calls, extents_of, full_partition
from runnel_redis.urls import client_url


class ClusterLog(KeyedLog):
    """Partitions are streams under the cluster layout's keys; one client per object.

    ``url`` is the transport's (``redis+cluster://`` or ``rediss+cluster://``): the layout
    follows from it, so the log still pickles as its URL."""

    def __init__(self, url: str, wait_replicas: int = 0, wait_timeout_ms: int = 1000) -> None:
        self.url = url
        self.layout = Cluster()
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self._cluster: RedisCluster | None = None
        self._keys: dict[PartitionId, str] = {}
        self._acked: dict[str, int] = {}

    def __getstate__(self) -> dict[str, Any]:
        """The URL, and the transport's ``wait_replicas`` when it asks for replicas."""
        state = super().__getstate__()
        if self.wait_replicas:
            state["wait"] = (self.wait_replicas, self.wait_timeout_ms)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        replicas, timeout_ms = state.get("wait", (0, 1000))
        self.__init__(state["url"], int(replicas), int(timeout_ms))  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"<ClusterLog {redact(self.url)}>"

    @property
    def cluster(self) -> RedisCluster:
        if self._cluster is None:
            self._cluster = RedisCluster.from_url(client_url(self.url), decode_responses=False)
        return self._cluster

    def _pipelined(
        self, calls: Sequence[tuple[Any, ...]], what: str, nodes: Sequence[Any] = ()
    ) -> list[Any]:
        """Replies in order, an error reply as its exception; a failure of the whole
        pipeline (no node reachable) as a LogError. With ``nodes`` (one per call), each
        call goes to its node, and a WAIT follows each node's calls on its connection
        (one pipeline keeps one connection per node): its reply comes last, per node."""
        if not calls:
            return []
        try:
            with self.cluster.pipeline() as pipe:
                if not nodes:
                    for call in calls:
                        pipe.execute_command(*call)
                    return list(pipe.execute(raise_on_error=False))
                by_node: dict[str, tuple[Any, list[int]]] = {}
                for n, node in enumerate(nodes):
                    by_node.setdefault(node.name, (node, []))[1].append(n)
                order: list[int] = []
                for node, members in by_node.values():
                    for n in members:
                        pipe.execute_command(*calls[n], target_nodes=node)
                    pipe.execute_command(
                        "WAIT", self.wait_replicas, self.wait_timeout_ms, target_nodes=node
                    )
                    order += (*members, -1)
                got = pipe.execute(raise_on_error=False)
        except Exception as exc:  # redis-py's cluster errors are not all RedisErrors
            raise self._failed(what, exc) from exc
        replies: list[Any] = [None] * len(calls)
        self._acked = {}
        names = iter(by_node)
        for n, reply in zip(order, got, strict=True):
            if n >= 0:
                replies[n] = reply
            else:
                self._acked[next(names)] = reply if isinstance(reply, int) else 0
        return replies

    def extents(self, partitions: Sequence[PartitionId]) -> list[Extent]:
        what = "reading the extents of partitions"
        replies = self._pipelined(extent_calls(map(self._key, partitions)), what)
        self._raise_first(replies, what)
        return extents_of(replies)

    def read(self, partition: PartitionId, first: str, last: str, count: int) -> Iterator[Entries]:
        client = self.cluster
        key = self._key(partition)
        while True:
            try:
                page: Any = client.xrange(key, first, last, count=count)
            except Exception as exc:
                raise self._failed(f"reading {key} from {first}", exc) from exc
            if not page:
                return
            yield page  # redis-py's (id, fields) pairs: our Entries already
            if len(page) < count:
                return
            first = next_id(page[-1][0].decode())

    def nth_ids(self, ranges: Sequence[tuple[PartitionId, str, str, int]]) -> list[str | None]:
        calls = [
            ("EVAL", scripts.NTH_ID, 1, self._key(partition), first, last, n)
            for partition, first, last, n in ranges
        ]
        what = "bounding reads"
        replies = self._pipelined(calls, what)
        self._raise_first(replies, what)
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
        """One APPEND call per partition (its entries in order, whole or not at all;
        with an identity, APPEND_IDENTIFIED), in one pipeline; :class:`PartlyAppended`
        when some partitions' parts are in and others not. The cluster client sends a
        call again after a lost connection or a failover: with an identity, a partition
        that has it already takes nothing more."""
        if not entries:
            return Appended()
        if identity is not None:
            # The cluster client sends a command again by itself (a write that failed
            # part-way; the synchronous one also a lost reply): every try is looked up.
            identity = checked(identity, entries).retried()
        marks = identity_marks(identity) if identity is not None else None
        groups: dict[PartitionId, list[Any]] = {}
        members: dict[PartitionId, list[int]] = {}
        for i, (partition, fields) in enumerate(entries):
            args = groups.get(partition)
            if args is None:
                members[partition] = []
                head: list[Any]
                if identity is None:
                    head = [maxlen if maxlen is not None else b"", b"drop" if drop_oldest else b""]
                else:
                    head = identity_head(maxlen, drop_oldest, 1, identity, window)
                args = groups[partition] = head
            members[partition].append(i)
            args += (1, len(fields)) if marks is None else (1, marks[i], len(fields))
            for item in fields.items():
                args += item
        text = scripts.APPEND if identity is None else scripts.APPEND_IDENTIFIED
        calls = [
            ("EVAL", text, *self._append_keys(partition, drop_oldest, identity), *args)
            for partition, args in groups.items()
        ]
        what = f"appending {plural(len(entries), 'entry', 'entries')} to "
        what += plural(len(groups), "partition")
        if self.wait_replicas:
            cluster = self.cluster
            nodes = [cluster.get_node_from_key(self._key(p)) for p in groups]
            if any(node is None for node in nodes):
                raise self._failed(what, ConnectionError("the cluster's slot map is incomplete"))
            replies = self._pipelined(calls, what, nodes)
        else:
            replies = self._pipelined(calls, what)
        written: list[PartitionId] = []
        refused: list[PartitionId] = []
        unknown: list[PartitionId] = []
        first_error: Exception | None = None
        for partition, reply in zip(groups, replies, strict=True):
            if not isinstance(reply, Exception):
                written.append(partition)
                continue
            first_error = first_error or reply
            # An error reply means the script wrote nothing (it checks before writing);
            # a lost connection leaves it unknown whether it ran.
            (refused if isinstance(reply, ResponseError) else unknown).append(partition)
        if first_error is None:
            if self.wait_replicas:
                for node, count in self._acked.items():
                    where = f" (master {node})"
                    check_replicated(count, self.wait_replicas, self.wait_timeout_ms, where)
            return _gathered(len(entries), members, replies, identity is not None)
        if not written:
            full = full_partition(first_error, list(groups), maxlen)
            if full is not None and not unknown:
                raise full from None
            raise self._failed(what, first_error) from first_error
        message = (
            f"{redact(self.url)}: {what} failed part-way: the entries of partitions "
            f"{_numbers(written)} are in the store"
            + (f", those of {_numbers(refused)} were not written" if refused else "")
            + (f", those of {_numbers(unknown)} may or may not be" if unknown else "")
            + f" ({type(first_error).__name__}: {first_error})"
        )
        raise PartlyAppended(message, written, refused, unknown) from first_error

    def forget_producer(self, partitions: Sequence[PartitionId], producer: str) -> None:
        what = f"forgetting producer {producer!r}"
        calls = [("HDEL", self.layout.producers(*p), producer) for p in partitions]
        self._raise_first(self._pipelined(calls, what), what)

    def _append_keys(
        self, partition: PartitionId, drop_oldest: bool, identity: Identity | None
    ) -> list[Any]:
        """The key count and keys of one partition's append (lua/append.lua, or with an
        identity lua/append_identified.lua)."""
        keys = [self._key(partition)]
        if drop_oldest:
            keys.append(self.layout.lost(*partition))
        if identity is not None:
            keys += self._state_keys(partition, identity)
        return [len(keys), *keys]

    def _raise_first(self, replies: Sequence[Any], what: str) -> None:
        for reply in replies:
            if isinstance(reply, Exception):
                raise self._failed(what, reply) from reply

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def _gathered(
    count: int, members: dict[PartitionId, list[int]], replies: Sequence[Any], identified: bool
) -> Appended:
    """The ids of ``count`` entries from each partition's reply (and its duplicates)."""
    ids: list[bytes] = [b""] * count
    duplicates = 0
    for indexes, reply in zip(members.values(), replies, strict=True):
        if identified:
            duplicates += int(reply[-1])
        for i, entry_id in zip(indexes, reply, strict=False):
            ids[i] = entry_id
    return Appended(ids, duplicates)


def _numbers(partitions: Sequence[PartitionId]) -> str:
    """Partitions as the stream and their numbers (an append is to one stream)."""
    streams = sorted({f"{p.app}.{p.stream}" for p in partitions})
    numbers = ", ".join(str(p.number) for p in partitions)
    return f"{'/'.join(streams)} [{numbers}]"
