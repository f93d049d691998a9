"""The log role of the ``memory://`` store: partitions and consumer groups in this process."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from runnel.exceptions import EntryIdError, PartitionFull
from runnel.memory import identities
from runnel.memory.logs import (
    ZERO,
    Group,
    NoGroup,
    PartitionLog,
    ack,
    decode_fields,
    parse_id,
    show_id,
    wall_ms,
)
from runnel.memory.server import MemoryServer
from runnel.store.identity import DEFAULT_WINDOW, Appended, Identity, Window, checked
from runnel.store.log import Fields, Log, LogAdmin, PartitionId, trim_slack


class MemoryLog(Log, LogAdmin):
    def __init__(self, store: MemoryServer) -> None:
        self.server = store

    def __repr__(self) -> str:
        return f"<MemoryLog memory://{self.server.name}>"

    def partition_key(self, partition: PartitionId) -> str:
        app, stream, number = partition
        return f"{app}.{stream}.{number}"

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
        if identity is not None:
            identity = checked(identity, entries, ids)
        converted = [(p, decode_fields(fields)) for p, fields in entries]
        explicit = [_parse_id(i) for i in ids] if ids is not None else [None] * len(entries)
        store = self.server
        with store.lock:
            checked_ids: set[PartitionId] = set()
            for (p, _), at in zip(converted, explicit, strict=True):
                if at is not None and p not in checked_ids:
                    checked_ids.add(p)
                    last = store.log(p).last_id
                    if at <= last:
                        raise EntryIdError(
                            f"id {at[0]}-{at[1]} is not above {last[0]}-{last[1]}, the last id "
                            "of its partition"
                        )
            todo = list(range(len(converted)))
            if identity is not None:
                members: dict[PartitionId, list[int]] = {}
                for i, (p, _) in enumerate(converted):
                    members.setdefault(p, []).append(i)
                now = store.clock()
                plan = identities.plan(identity, members, store.identities, store.log, now, window)
                todo = plan.appending
            adding = Counter(converted[i][0] for i in todo)
            slack = trim_slack(maxlen) if maxlen is not None else 0
            if maxlen is not None and not drop_oldest:
                for p, count in adding.items():
                    slowest = store.log(p).refuses(count, maxlen, slack)
                    if slowest is not None:
                        raise _full(p, slowest, maxlen, len(converted))
            stamp = wall_ms()
            parsed: list[tuple[int, int] | None] = [None] * len(converted)
            for i in todo:
                p, f = converted[i]
                parsed[i] = store.log(p).append(f, None, stamp, explicit[i])
            added: list[bytes | None] = [show_id(x) if x is not None else None for x in parsed]
            if maxlen is not None:
                for p in adding:
                    store.log(p).trim(maxlen, slack, drop_oldest)
            if adding:
                store.notify(set(adding))
            if identity is None:
                return Appended(added)  # type: ignore[arg-type]  # every entry appended
            for i, reply in plan.replies.items():
                added[i] = added[reply] if isinstance(reply, int) else reply
            identities.settle(identity, members, plan, added, parsed, store.identities, now, window)
        return Appended(added, plan.duplicates)  # type: ignore[arg-type]  # all filled

    async def forget_producer(self, partitions: Sequence[PartitionId], producer: str) -> None:
        with self.server.lock:
            for p in partitions:
                found = self.server.remembered.get(p)
                if found is not None:
                    found.producers.pop(producer, None)

    async def duplicates(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        with self.server.lock:
            found = self.server.remembered
            return {p: r.duplicates if (r := found.get(p)) else 0 for p in partitions}

    async def remembered(
        self, partitions: Sequence[PartitionId]
    ) -> dict[PartitionId, tuple[int, int]]:
        with self.server.lock:
            found, now = self.server.remembered, self.server.clock()
            return {p: r.count(now) if (r := found.get(p)) else (0, 0) for p in partitions}

    async def lost(self, partitions: Sequence[PartitionId], group: str) -> dict[PartitionId, int]:
        with self.server.lock:
            logs = self.server.logs
            # "is not None": an empty log (all its entries trimmed or removed) is falsy.
            return {
                p: (log.lost.get(group, 0) if (log := logs.get(p)) is not None else 0)
                for p in partitions
            }

    async def count_lost(self, partition: PartitionId, group: str, count: int) -> None:
        with self.server.lock:
            lost = self.server.log(partition).lost
            lost[group] = lost.get(group, 0) + count

    async def ensure_group(self, partitions: Sequence[PartitionId], group: str) -> None:
        with self.server.lock:
            for p in partitions:
                self.server.log(p).groups.setdefault(group, Group())

    async def adopt_pending(self, partition: PartitionId, group: str, consumer: str) -> int:
        with self.server.lock:
            found = _group(self.server.log(partition), group, partition)
            moved = 0
            for xid, owner in found.pending.items():
                if owner != consumer:
                    found.pending[xid] = consumer
                    moved += 1
            return moved

    async def last_delivered(
        self, partitions: Sequence[PartitionId], group: str
    ) -> dict[PartitionId, bytes]:
        out = {}
        with self.server.lock:
            for p in partitions:
                log = self.server.logs.get(p)
                if log is not None and group in log.groups:
                    out[p] = show_id(log.groups[group].last_delivered)
        return out

    async def wait_for_new(self, after: Mapping[PartitionId, bytes | None], block_ms: int) -> bool:
        since = {p: ZERO if xid is None else parse_id(xid) for p, xid in after.items()}
        logs = self.server.logs

        def arrived() -> bool | None:
            return (
                any((log := logs.get(p)) and log.last_id > xid for p, xid in since.items()) or None
            )

        return bool(await self.server.wait_for(since, arrived, block_ms))

    async def reset_group(self, partitions: Sequence[PartitionId], group: str, start: str) -> None:
        with self.server.lock:
            for p in partitions:
                log = self.server.log(p)
                found = log.groups.setdefault(group, Group())
                found.last_delivered = log.last_id if start == "$" else parse_id(start)
                found.pending.clear()

    async def backlog(
        self, partitions: Sequence[PartitionId], group: str
    ) -> dict[PartitionId, tuple[int | None, int]]:
        out: dict[PartitionId, tuple[int | None, int]] = {}
        with self.server.lock:
            for p in partitions:
                log = self.server.logs.get(p)
                found = log.groups.get(group) if log is not None else None
                if log is None:
                    out[p] = (0, 0)
                elif found is None:
                    out[p] = (len(log), 0)
                else:
                    out[p] = (log.lag(found), len(found.pending))
        return out

    async def first_pending(self, partition: PartitionId, group: str) -> bytes | None:
        with self.server.lock:
            log = self.server.logs.get(partition)
            found = log.groups.get(group) if log is not None else None
            if not found or not found.pending:
                return None
            return show_id(next(iter(found.pending)))

    async def ack(self, partition: PartitionId, group: str, ids: Sequence[bytes]) -> None:
        with self.server.lock:
            ack(_group(self.server.log(partition), group, partition), ids)

    async def scan(
        self, partition: PartitionId, after: bytes | None, count: int
    ) -> list[tuple[bytes, dict[bytes, bytes]]]:
        with self.server.lock:
            log = self.server.logs.get(partition)
            if log is None:
                return []
            start = ZERO if after is None else parse_id(after)
            return [(show_id(x), dict(log.fields[x])) for x in log.after(start, count)]

    async def remove(self, partition: PartitionId, ids: Sequence[bytes]) -> int:
        with self.server.lock:
            log = self.server.logs.get(partition)
            return log.remove(parse_id(x) for x in ids) if log is not None else 0

    async def lengths(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        with self.server.lock:
            return {p: len(self.server.logs.get(p) or ()) for p in partitions}

    async def appended(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int | None]:
        with self.server.lock:
            logs = self.server.logs
            return {p: log.added if (log := logs.get(p)) is not None else 0 for p in partitions}


def _full(partition: PartitionId, group: str, maxlen: int, count: int) -> PartitionFull:
    return PartitionFull(
        f"partition {partition.number} of stream {partition.stream!r} is full "
        f"(partition_size {maxlen}) with entries processor {group!r} has not acknowledged",
        [None] * count,
        partition.stream,
        partition.number,
        group,
        maxlen,
    )


def _group(log: PartitionLog, group: str, partition: PartitionId) -> Group:
    found = log.groups.get(group)
    if found is None:
        raise NoGroup(f"no consumer group {group!r} on {partition.stream}[{partition.number}]")
    return found


def _parse_id(text: str) -> tuple[int, int] | None:
    """``"*"`` -> None; ``"MS-SEQ"`` (already checked by the stream) -> its numbers."""
    if text == "*":
        return None
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)
