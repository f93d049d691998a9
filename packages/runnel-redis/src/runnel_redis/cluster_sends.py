"""A send on a Redis Cluster: one append script per partition (its entries in order, whole
or not at all), all of them in one pipeline, and what their replies make of the send.

With an identity the script checks and keeps the partition's identity state beside its
entries (lua/append_identified.lua), so each part is recognised when sent again. While a
partition's slot is being moved between masters its keys can lie on both, and a script
over several of them is refused (TRYAGAIN) until the move is done; the stream alone is
followed there (ASK). So a part refused that way on its call's first try (nothing of the
call can be in) is appended as a plain append, as a send without identities is: sends go
on through a slot move, those parts without the protection of their identity (a send
whose plain part then loses its reply is not sent again: :attr:`PartlySent.identified`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, cast

from redis.exceptions import ClusterError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from runnel.exceptions import EntryIdError, PartlySent
from runnel.store.identity import (
    Appended,
    CallIdentity,
    Identity,
    KeyedIdentity,
    Window,
    checked,
)
from runnel.store.log import Fields, PartitionId
from runnel.text import runs
from runnel_redis import scripts
from runnel_redis.cluster_calls import eval_call, pipelined
from runnel_redis.errors import user_of
from runnel_redis.identities import identity_head, identity_marks
from runnel_redis.replicas import check_replicated
from runnel_redis.seam import refusal
from runnel_redis.transport import partition_full


class RedisClusterTransport(Protocol):
    """What a send takes of :class:`runnel_redis.cluster.RedisClusterTransport`."""

    cluster: Any
    url: str
    wait_replicas: int
    wait_timeout_ms: int

    def partition_key(self, partition: PartitionId) -> str: ...

    def lost_key(self, partition: PartitionId) -> str: ...

    def state_keys(self, partition: PartitionId, sequenced: bool) -> list[str]: ...

    def _where(self, key: str) -> str: ...

    async def _append_and_wait(
        self, calls: Sequence[tuple[Any, ...]], keys: Sequence[str]
    ) -> tuple[list[Any], dict[str, int]]: ...


_LOST = (RedisConnectionError, RedisTimeoutError, OSError)
"""A reply that never came: the command may have run."""


def lost(reply: object) -> bool:
    return isinstance(reply, _LOST)


def moving(reply: object) -> bool:
    """A part refused because its slot is being moved (TRYAGAIN, or the client's
    redirections exhausted: ``TTL exhausted``): it did not run."""
    return isinstance(reply, TryAgainError | ClusterError)


class Parts:
    """A send's entries by partition, and each partition's append call."""

    def __init__(
        self,
        transport: RedisClusterTransport,
        entries: Sequence[tuple[PartitionId, Fields]],
        maxlen: int | None,
        ids: Sequence[str] | None,
        drop_oldest: bool,
        identity: Identity | None,
        window: Window,
    ) -> None:
        self.entries = entries
        self.maxlen = maxlen
        self.drop_oldest = drop_oldest
        self.identity = identity
        groups: dict[str, list[int]] = {}
        for i, (partition, _) in enumerate(entries):
            groups.setdefault(transport.partition_key(partition), []).append(i)
        self.keys = list(groups)
        self.members = list(groups.values())
        self.stream_keys: list[list[Any]] = []
        self.calls: list[tuple[Any, ...]] = []
        marks = identity_marks(identity) if identity is not None else None
        for key, members in groups.items():
            partition = entries[members[0]][0]
            keys: list[Any] = [key]
            if drop_oldest:
                keys.append(transport.lost_key(partition))
            self.stream_keys.append(keys)
            if identity is None and ids is not None:
                first = next((ids[i] for i in members if ids[i] != "*"), "")
                args: list[Any] = [*self.head(), first]
                for i in members:
                    fields = entries[i][1]
                    args += (1, ids[i], len(fields))
                    for item in fields.items():
                        args += item
                self.calls.append(eval_call(scripts.APPEND_AT, keys, args))
            elif identity is None:
                self.calls.append(self.plain_call(len(self.calls)))
            else:
                sequenced = not isinstance(identity, CallIdentity | KeyedIdentity)
                state = transport.state_keys(partition, sequenced)
                args = identity_head(maxlen, drop_oldest, 1, identity, window)
                for i in members:
                    fields = entries[i][1]
                    args += (1, len(fields)) if marks is None else (1, marks[i], len(fields))
                    for item in fields.items():
                        args += item
                self.calls.append(eval_call(scripts.APPEND_IDENTIFIED, [*keys, *state], args))

    def head(self) -> list[Any]:
        cap = self.maxlen if self.maxlen is not None else b""
        return [cap, b"drop" if self.drop_oldest else b""]

    def plain_call(self, n: int) -> tuple[Any, ...]:
        """Part ``n``'s append without identity (lua/append.lua)."""
        args = self.head()
        for i in self.members[n]:
            fields = self.entries[i][1]
            args += (1, len(fields))
            for item in fields.items():
                args += item
        return eval_call(scripts.APPEND, self.stream_keys[n], args)


async def append(
    transport: RedisClusterTransport,
    entries: Sequence[tuple[PartitionId, Fields]],
    maxlen: int | None,
    ids: Sequence[str] | None,
    drop_oldest: bool,
    identity: Identity | None,
    window: Window,
) -> Appended:
    """:meth:`RedisClusterTransport.append`."""
    first_try = False
    if identity is not None:
        identity = checked(identity, entries, ids)
        first_try = isinstance(identity, CallIdentity) and identity.first_try
        # The cluster client sends a command again by itself (a write that failed part-way;
        # the synchronous client also one whose reply was lost): every try is looked up.
        identity = identity.retried()
    parts = Parts(transport, entries, maxlen, ids, drop_oldest, identity, window)
    replies, acked = await _send(transport, parts.calls, parts.keys)
    plain: set[int] = set()
    if first_try:
        plain = {n for n, reply in enumerate(replies) if moving(reply)}
        if plain:
            order = sorted(plain)
            again, acked_again = await _send(
                transport, [parts.plain_call(n) for n in order], [parts.keys[n] for n in order]
            )
            for n, reply in zip(order, again, strict=True):
                replies[n] = reply
            for node, count in acked_again.items():
                acked[node] = min(count, acked.get(node, count))
    out: list[bytes | None] = [None] * len(entries)
    failed: list[tuple[int, Exception]] = []
    duplicates = 0
    for n, (members, reply) in enumerate(zip(parts.members, replies, strict=True)):
        if isinstance(reply, Exception):
            failed.append((n, reply))
            continue
        if identity is not None and n not in plain:
            duplicates += int(reply.pop())
        for i, entry_id in zip(members, reply, strict=True):
            out[i] = entry_id
    if failed:
        _raise(transport, parts, ids, out, failed, plain, identity is not None)
    for node, count in acked.items():
        where = f" (master {node})"
        check_replicated(count, transport.wait_replicas, transport.wait_timeout_ms, where)
    return Appended(cast(list[bytes], out), duplicates)


async def _send(
    transport: RedisClusterTransport, calls: Sequence[tuple[Any, ...]], keys: Sequence[str]
) -> tuple[list[Any], dict[str, int]]:
    if transport.wait_replicas:
        return await transport._append_and_wait(calls, keys)
    return await pipelined(transport.cluster, calls), {}


def _raise(
    transport: RedisClusterTransport,
    parts: Parts,
    ids: Sequence[str] | None,
    out: list[bytes | None],
    failed: list[tuple[int, Exception]],
    plain: set[int],
    identified: bool,
) -> None:
    """The error for a send some parts of which failed."""
    # A lost reply first: the one failure a caller may have to send again.
    n, error = min(failed, key=lambda f: not lost(f[1]))
    key, entries = parts.keys[n], parts.entries
    written = any(xid is not None for xid in out)
    if all(str(e).startswith("RUNNELFULL ") for _, e in failed):
        group = str(error).split(" ", 2)[2]
        full = partition_full(entries[parts.members[n][0]][0], group, parts.maxlen or 0, 0)
        full.ids = out
        raise full
    if ids is not None and str(error).startswith("IDORDER") and not written:
        raise EntryIdError(str(error).removeprefix("IDORDER ")) from None
    in_doubt = any(lost(e) for _, e in failed)
    # A part sent without its identity (its slot moving) and in doubt cannot be sent
    # again safely: said so, even when nothing else of the send went in.
    covered = identified and not any(lost(e) and m in plain for m, e in failed)
    if not written and covered:
        raise error
    sent = [i for i, entry in enumerate(out) if entry is not None]
    # An error reply means the script wrote nothing; a lost connection leaves it
    # unknown whether the command ran.
    others = "may or may not be (the connection failed)" if in_doubt else "were not written"
    # A refusal (a full master) as Runnel's error, so the cause says what it is.
    cause = refusal(error, user_of(transport.url)) or error
    failure = PartlySent(
        f"{len(sent)} of {len(entries)} records are in Redis (indexes {runs(sent) or 'none'}); "
        f"the others {others}: {transport._where(key)}: {cause}",
        out,
        in_doubt,
        identified=covered,
    )
    raise failure from cause
