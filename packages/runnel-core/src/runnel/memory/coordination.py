"""Membership, control messages, locks, heartbeats, quarantines and leadership in a
:class:`~runnel.memory.server.MemoryServer`.

Each method runs under the server's lock, so what the Redis store does in one script
(check a lock, then read or acknowledge) is atomic here too. Locks, heartbeats and
leaders expire by the server's clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from runnel.memory.logs import (
    ZERO,
    Group,
    Id,
    NoGroup,
    PartitionLog,
    ack,
    decode_fields,
    parse_id,
    show_id,
    wall_ms,
)
from runnel.memory.server import MemoryServer
from runnel.store.coordination import (
    Coordination,
    Leadership,
    Members,
    Quarantine,
    ReadResult,
    members_from_json,
    members_to_json,
)
from runnel.store.log import Entry, PartitionId, Position, trim_slack
from runnel.store.state import Commit, Output

CONTROL_MAXLEN = 1000
CONTROL_COUNT = 100


class MemoryCoordination(Coordination):
    def __init__(
        self, store: MemoryServer, app: str, stream: str, processor: str, group: str
    ) -> None:
        self.server = store
        self.app, self.stream, self.processor, self.group = app, stream, processor, group
        scope = (app, stream, processor)
        self._members_key = ("memb", *scope)
        self._control_key = ("ctrl", *scope)
        self._quarantine_key = ("quar", *scope)
        self._scope = scope

    def _lock(self, partition: PartitionId) -> tuple[str, str, str, str, int]:
        return ("lock", *self._scope, partition.number)

    def _beat(self, executor: str) -> tuple[str, str, str, str, str]:
        return ("beat", *self._scope, executor)

    # Membership and control.

    async def members(self) -> Members:
        with self.server.lock:
            return members_from_json(self.server.values.get(self._members_key))

    async def change_members(
        self, change: Callable[[Members], Members], reason: str, executor: str
    ) -> Members:
        store = self.server
        with store.lock:
            members = change(members_from_json(store.values.get(self._members_key)))
            store.values[self._members_key] = members_to_json(members)
            self._announce(reason, executor)
            return members

    def _announce(self, reason: str, executor: str) -> None:
        control = self.server.log(self._control_key)
        fields = {b"reason": reason.encode(), b"executor": executor.encode()}
        control.append(fields, CONTROL_MAXLEN, wall_ms())
        self.server.notify([self._control_key])

    async def announce(self, reason: str, executor: str) -> None:
        with self.server.lock:
            self._announce(reason, executor)

    async def control_tail(self) -> bytes:
        with self.server.lock:
            control = self.server.logs.get(self._control_key)
            return show_id(control.last_id if control is not None else ZERO)

    async def control(self, after: bytes, block_ms: int) -> tuple[bytes, list[dict[str, str]]]:
        start = parse_id(after)
        logs = self.server.logs
        key = self._control_key

        def messages() -> tuple[bytes, list[dict[str, str]]] | None:
            control = logs.get(key)
            ids = control.after(start, CONTROL_COUNT) if control is not None else []
            if control is None or not ids:
                return None
            found = [
                {k.decode(): v.decode() for k, v in control.fields[xid].items()} for xid in ids
            ]
            return show_id(ids[-1]), found

        return await self.server.wait_for([key], messages, block_ms) or (after, [])

    # Locks and heartbeats.

    async def acquire(
        self, owner: str, partitions: Sequence[PartitionId], ttl_ms: int
    ) -> set[PartitionId]:
        store = self.server
        got = set()
        with store.lock:
            for p in partitions:
                if store.holder(self._lock(p)) in (None, owner):
                    store.hold(self._lock(p), owner, ttl_ms)
                    got.add(p)
        return got

    async def release(self, owner: str, partitions: Sequence[PartitionId]) -> None:
        store = self.server
        with store.lock:
            for p in partitions:
                if store.holder(self._lock(p)) == owner:
                    del store.expiring[self._lock(p)]

    async def beat(
        self, owner: str, partitions: Sequence[PartitionId], ttl_ms: int
    ) -> set[PartitionId]:
        store = self.server
        held = set()
        with store.lock:
            store.hold(self._beat(owner), owner, ttl_ms)
            for p in partitions:
                if store.holder(self._lock(p)) == owner:
                    store.hold(self._lock(p), owner, ttl_ms)
                    held.add(p)
        return held

    async def alive(self, executors: Sequence[str]) -> set[str]:
        with self.server.lock:
            return {e for e in executors if self.server.holder(self._beat(e)) is not None}

    async def lock_owners(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, str | None]:
        with self.server.lock:
            return {p: self.server.holder(self._lock(p)) for p in partitions}

    # Fenced reading and acknowledging.

    async def read(
        self, owner: str, consumer: str, positions: Mapping[PartitionId, Position], count: int
    ) -> ReadResult:
        store = self.server
        result = ReadResult()
        with store.lock:
            held = [p for p in positions if store.holder(self._lock(p)) == owner]
            result.lost = [p for p in positions if p not in held]
            # Every group looked up before anything is delivered: an error reads nothing.
            groups = [(p, store.log(p), self._group(store.log(p), p)) for p in held]
            for p, log, group in groups:
                entries = _read_one(log, group, consumer, positions[p], count)
                if entries is not None:
                    result.entries.append((p, entries))
        return result

    def _group(self, log: PartitionLog, partition: PartitionId) -> Group:
        group = log.groups.get(self.group)
        if group is None:
            raise NoGroup(f"no consumer group {self.group!r} on {self.stream}[{partition.number}]")
        return group

    async def ack(
        self, owner: str, ids: Mapping[PartitionId, Sequence[bytes]]
    ) -> list[PartitionId]:
        store = self.server
        lost = []
        with store.lock:
            for p, xids in ids.items():
                if store.holder(self._lock(p)) != owner:
                    lost.append(p)
                    continue
                group = store.log(p).groups.get(self.group)
                if group is not None:
                    ack(group, xids)
        return lost

    commits_ride = True  # in-process: committing before a read costs no round trip

    async def commit(self, owner: str, commits: Mapping[PartitionId, Commit]) -> list[PartitionId]:
        store = self.server
        lost = []
        with store.lock:
            for p, commit in commits.items():
                if store.holder(self._lock(p)) != owner:
                    lost.append(p)
                    continue
                store.write(p, commit.writes, commit.deadlines)
                group = store.log(p).groups.get(self.group)
                for sends in commit.sends:
                    fresh = group is None or any(parse_id(x) in group.pending for x in sends.ids)
                    if group is not None:
                        ack(group, sends.ids)
                    if fresh:
                        append_outputs(store, sends.outputs)
                if group is not None:
                    ack(group, commit.ids)
        return lost

    # Quarantines.

    async def quarantine(self, partition: PartitionId, entry_id: str | None, error: str) -> None:
        with self.server.lock:
            held = self.server.values.setdefault(self._quarantine_key, {})
            held[partition.number] = Quarantine(id=entry_id, error=error, since=time.time())

    async def quarantined(self) -> dict[PartitionId, Quarantine]:
        with self.server.lock:
            held = self.server.values.get(self._quarantine_key, {})
            return {PartitionId(self.app, self.stream, n): q for n, q in held.items()}

    async def lift(
        self, partitions: Sequence[PartitionId] | None, executor: str
    ) -> list[PartitionId]:
        with self.server.lock:
            held = self.server.values.get(self._quarantine_key, {})
            numbers = set(held) if partitions is None else {p.number for p in partitions}
            lifted = sorted(numbers & set(held))
            for n in lifted:
                del held[n]
            self._announce("resume", executor)
        return [PartitionId(self.app, self.stream, n) for n in lifted]


def _read_one(
    log: PartitionLog, group: Group, consumer: str, position: Position, count: int
) -> list[Entry] | None:
    """As XREADGROUP: new entries (None when there are none), or the consumer's pending
    ones after the position (always a list, empty once they are drained)."""
    if position.new:
        return [log.entry(xid) for xid in log.deliver_new(group, consumer, count)] or None
    after: Id = ZERO if position.after is None else parse_id(position.after)
    return [log.entry(xid) for xid in log.own_pending(group, consumer, after, count)]


class MemoryLeadership(Leadership):
    def __init__(self, store: MemoryServer, app: str) -> None:
        self.server = store
        self._key = ("lead", app)

    async def claim(self, candidate: str, ttl_ms: int) -> bool:
        with self.server.lock:
            if self.server.holder(self._key) not in (None, candidate):
                return False
            self.server.hold(self._key, candidate, ttl_ms)
            return True

    async def resign(self, candidate: str) -> None:
        with self.server.lock:
            if self.server.holder(self._key) == candidate:
                del self.server.expiring[self._key]

    async def leader(self) -> str | None:
        with self.server.lock:
            return self.server.holder(self._key)


def append_outputs(store: MemoryServer, outputs: Sequence[Output]) -> None:
    """Append committed outputs to their partitions, held to their caps as a send is
    (never past what a group has not acknowledged; an output is never refused)."""
    now = wall_ms()
    touched = {}
    for partition, fields, cap in outputs:
        store.log(partition).append(decode_fields(fields), None, now)
        touched[partition] = cap
    for partition, cap in touched.items():
        if cap is not None:
            store.log(partition).trim(cap, trim_slack(cap), drop_oldest=False)
    store.notify(set(touched))
