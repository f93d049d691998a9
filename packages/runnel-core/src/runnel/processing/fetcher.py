"""The fetcher: read loops (two lanes) feeding the inboxes of every partition an executor owns."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from runnel.exceptions import GroupMissing, TransportError
from runnel.runtime.retry import (
    BLOCK_CAP_MS,
    Backoff,
    outage,
    reraise_if_cancelled,
    retrying,
)
from runnel.store.log import NEW, PartitionId, Position
from runnel.store.state import Commit
from runnel.types import Event, Partition

if TYPE_CHECKING:
    from runnel.metrics.stats import ProcessorStats
    from runnel.processing.acks import Acks, LostPartition, Pending
    from runnel.processing.inbox import Inbox
    from runnel.store.coordination import Coordination, ReadResult
    from runnel.store.log import Log

log = logging.getLogger("runnel.fetcher")


LANES = 2
"""Reads in flight at once, each for its own share of the partitions."""


class Source(Protocol):
    """Where a fetcher reads: one executor's fenced view of its processor's partitions."""

    async def read(self, positions: Mapping[PartitionId, Position], count: int) -> ReadResult:
        """Up to ``count`` entries per partition from each position, never blocking, only
        from partitions whose lock we hold (the others are reported lost)."""
        ...

    async def read_and_ack(
        self,
        positions: Mapping[PartitionId, Position],
        count: int,
        ids: Mapping[PartitionId, Sequence[bytes]],
    ) -> tuple[ReadResult, list[PartitionId]]:
        """Acknowledge ``ids`` and read, fenced as :meth:`read`; the partitions whose ids
        were not acknowledged (lost)."""
        ...

    async def read_and_commit(
        self,
        positions: Mapping[PartitionId, Position],
        count: int,
        commits: Mapping[PartitionId, Commit],
    ) -> tuple[ReadResult, list[PartitionId]]:
        """Commit ``commits`` (table writes with their ids) and read, fenced as
        :meth:`read`; the partitions whose commits were not applied (lost)."""
        ...

    async def last_delivered(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, bytes]:
        """Where "new" starts on each partition."""
        ...

    async def wait_for_new(self, after: Mapping[PartitionId, bytes | None], block_ms: int) -> bool:
        """Block until a partition has an entry after its id, or time is up."""
        ...

    async def drop(self, partition: PartitionId, ids: Sequence[bytes]) -> None:
        """Acknowledge entries that were trimmed away before anyone processed them, and
        count them as lost."""
        ...

    async def ensure_group(self, partitions: Sequence[PartitionId]) -> None:
        """Make the consumer group on ``partitions`` where the store has none (again)."""
        ...


@dataclass
class StoreSource:
    """A :class:`Source` over the store: reads and acknowledges as ``owner``, reading as
    ``consumer`` of ``group``."""

    coordination: Coordination
    log: Log
    owner: str
    consumer: str
    group: str

    async def read(self, positions: Mapping[PartitionId, Position], count: int) -> ReadResult:
        return await self.coordination.read(self.owner, self.consumer, positions, count)

    async def read_and_ack(
        self,
        positions: Mapping[PartitionId, Position],
        count: int,
        ids: Mapping[PartitionId, Sequence[bytes]],
    ) -> tuple[ReadResult, list[PartitionId]]:
        return await self.coordination.read_and_ack(
            self.owner, self.consumer, positions, count, ids
        )

    async def read_and_commit(
        self,
        positions: Mapping[PartitionId, Position],
        count: int,
        commits: Mapping[PartitionId, Commit],
    ) -> tuple[ReadResult, list[PartitionId]]:
        return await self.coordination.read_and_commit(
            self.owner, self.consumer, positions, count, commits
        )

    async def last_delivered(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, bytes]:
        return await self.log.last_delivered(partitions, self.group)

    async def wait_for_new(self, after: Mapping[PartitionId, bytes | None], block_ms: int) -> bool:
        return await self.log.wait_for_new(after, block_ms)

    async def drop(self, partition: PartitionId, ids: Sequence[bytes]) -> None:
        await self.coordination.ack(self.owner, {partition: ids})
        await self.log.count_lost(partition, self.group, len(ids))

    async def ensure_group(self, partitions: Sequence[PartitionId]) -> None:
        await self.log.ensure_group(partitions, self.group)


class Fetcher:
    """Reads every owned partition whose inbox has room, in one round trip per round.

    Reads are fenced: the store reads a partition only if this executor still holds its
    lock, and reports the ones it lost. Each partition is read from its pending entries
    first (what an earlier owner read but never acknowledged, in order), then from new
    entries. A full inbox is left out of the next read, so memory stays flat on any
    backlog and a slow partition never holds the others back.

    The partitions are shared out among :data:`LANES` lanes by number, each a read loop
    of its own: while Redis prepares one lane's reply, the worker decodes and processes
    what another lane brought. With one loop the two took turns, and a worker draining a
    backlog sat idle a third of the time waiting for its next read. A partition belongs
    to one lane, so its reads stay in order.

    Reads never block. When nothing new came back, a lane sleeps until a consumer makes
    room or its watcher, blocked on its own connection on the partitions that were empty,
    sees a new entry there.
    """

    def __init__(
        self,
        inboxes: dict[PartitionId, Inbox],
        source: Source,
        *,
        lost: LostPartition,
        stats: ProcessorStats,
        group: str,
        block_ms: int,
    ) -> None:
        self.inboxes = inboxes
        self.source = source
        self.lost = lost
        self.stats = stats
        self.group = group
        self.block_ms = min(block_ms, BLOCK_CAP_MS)
        self.stopping = False
        self._wakes = [asyncio.Event() for _ in range(LANES)]

    def wake_for(self, partition: Partition) -> asyncio.Event:
        """What the partition's inbox sets when it wants reading: its lane's wake."""
        return self._wakes[partition.number % LANES]

    def look_again(self) -> None:
        """Partitions were assigned: every lane looks at its inboxes again."""
        for wake in self._wakes:
            wake.set()

    def stop(self) -> None:
        """Stop after the reads in flight; nothing read is lost, since what is not yet
        processed stays pending in the group."""
        self.stopping = True
        self.look_again()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for lane in range(LANES):
                tg.create_task(_Lane(self, lane).run(), name=f"fetcher lane {lane}")


def _carried(inboxes: Mapping[PartitionId, Inbox]) -> dict[PartitionId, tuple[Acks, Pending]]:
    """The finished events a read acknowledges on its way: each partition's recorded ids
    (and the table writes their iterations made, where the store commits them in the
    read), taken from its :class:`~runnel.processing.acks.Acks` (which then counts them as
    in flight, so a drain waits for them). Sending them with the read costs Redis no
    check and no round trip of their own."""
    carried = {}
    for key, box in inboxes.items():
        acks = box.acks
        if acks is not None and acks.rides:
            carried[key] = (acks, acks.take())
    return carried


class _Lane:
    """One read loop over the partitions whose number is ``lane`` modulo :data:`LANES`,
    woken by their inboxes only."""

    def __init__(self, fetcher: Fetcher, lane: int) -> None:
        self.fetcher = fetcher
        self.source = fetcher.source
        self.wake = fetcher._wakes[lane]
        self.lane = lane
        self._watch: dict[PartitionId, bytes | None] = {}
        self._armed = asyncio.Event()

    def _inboxes(self) -> dict[PartitionId, Inbox]:
        lane = self.lane
        return {
            key: box
            for key, box in self.fetcher.inboxes.items()
            if box.partition.number % LANES == lane
        }

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            watching = tg.create_task(self._watcher(), name=f"watcher {self.lane}")
            await self._fetch()
            watching.cancel()  # safe at any point: watching changes no state

    async def _fetch(self) -> None:
        fetcher = self.fetcher
        backoff = Backoff()
        while not fetcher.stopping:
            reraise_if_cancelled()
            inboxes = self._inboxes()
            if any(box.wants_more for box in inboxes.values()):
                wanted = {key: box.position for key, box in inboxes.items() if box.has_room}
            else:
                wanted = {}
            if not wanted:
                self.wake.clear()
                if not fetcher.stopping:
                    await self.wake.wait()
                continue
            count = max(inboxes[key].capacity for key in wanted)
            carried = _carried(inboxes)
            try:
                if any(pending.changes for _, pending in carried.values()):
                    commits = {key: pending.commit() for key, (_, pending) in carried.items()}
                    result, unacked = await self.source.read_and_commit(wanted, count, commits)
                elif carried:
                    ids = {key: pending.ids for key, (_, pending) in carried.items()}
                    result, unacked = await self.source.read_and_ack(wanted, count, ids)
                else:
                    result, unacked = await self.source.read(wanted, count), []
            except BaseException as exc:
                for acks, pending in carried.values():
                    acks.give_back(pending)
                    acks.nudge()  # the acknowledger sends them instead
                if not isinstance(exc, TransportError):
                    raise
                reraise_if_cancelled(exc)
                # The reply may have been lost after the store delivered entries to us:
                # those are pending now, so read the pending entries after what we hold.
                for held in inboxes.values():
                    if held.position == NEW:
                        held.position = Position.pending_after(held.last_id)
                stream = next(iter(inboxes.values())).partition.stream.name
                if isinstance(exc, GroupMissing):
                    await self._group_lost(stream, list(wanted), exc)
                    continue
                outage.failed(f"reading {stream}", exc)
                await backoff.sleep()
                continue
            for key, (acks, pending) in carried.items():
                acks.done()
                if key not in unacked:
                    acks.committed(pending)
            reraise_if_cancelled()  # a store client that swallowed our cancellation
            backoff.reset()
            for key in dict.fromkeys([*result.lost, *unacked]):
                fetcher.lost(key)
            got = False
            history = False
            for key, entries in result.entries:
                box = fetcher.inboxes.get(key)
                if box is None:
                    continue  # revoked meanwhile: the entries stay pending for the next owner
                if box.position != NEW:
                    history = True
                    if not entries:
                        box.position = NEW  # the partition's pending entries are drained
                        continue
                if entries:
                    got = True
                    await self._deliver(box, entries)
            if got:
                # Let the consumers just fed run first: the next read then takes these
                # partitions again with the rest, rather than the rest alone now and these
                # alone next (a lane's reads would split in two halves that take turns).
                await asyncio.sleep(0)
            if got or history or fetcher.stopping:
                continue
            if any(box.wants_more for key, box in self._inboxes().items() if key not in wanted):
                continue  # a consumer made room during the read
            self.wake.clear()
            await self._arm({key: box for key, box in inboxes.items() if key in wanted})
            reraise_if_cancelled()
            await self.wake.wait()
            self._armed.clear()

    async def _group_lost(
        self, stream: str, partitions: list[PartitionId], exc: GroupMissing
    ) -> None:
        """The store lost the group (and so what it had delivered and acknowledged): make
        it again, so the partitions are read from their first entry that is left."""
        log.warning(
            "%s: the consumer group %r is gone from the store (%s): making it again; "
            "what the store still holds of these partitions is read from the start",
            stream,
            self.fetcher.group,
            exc,
        )
        try:
            await self.source.ensure_group(partitions)
        except TransportError as failed:
            reraise_if_cancelled(failed)
            outage.failed(f"making the consumer group of {stream} again", failed)
            await asyncio.sleep(0.5)
        for key in partitions:
            box = self.fetcher.inboxes.get(key)
            if box is not None:
                box.position = NEW
                box.last_id = None

    async def _arm(self, boxes: dict[PartitionId, Inbox]) -> None:
        """Point the watcher at the partitions that came back empty."""
        unknown = [key for key, box in boxes.items() if box.last_id is None]
        if unknown:
            try:
                known = await self.source.last_delivered(unknown)
            except TransportError as exc:
                reraise_if_cancelled(exc)
                log.debug("reading group positions failed: %r", exc)
                known = {}
            for key in unknown:
                boxes[key].last_id = known.get(key)
        self._watch = {key: box.last_id for key, box in boxes.items()}
        self._armed.set()

    async def _watcher(self) -> None:
        """While armed, wait on its own connection for new entries on the quiet partitions."""
        source, block = self.source, self.fetcher.block_ms
        while True:
            reraise_if_cancelled()
            await self._armed.wait()
            try:
                if await source.wait_for_new(self._watch, block):
                    # Disarm until the lane points us at quiet partitions again: a store
                    # that answers without yielding (an in-process one) would otherwise
                    # keep us looping here and the lane would never run.
                    self._armed.clear()
                    self.wake.set()
            except TransportError as exc:
                reraise_if_cancelled(exc)
                log.debug("watching for new events failed: %r", exc)
                await asyncio.sleep(0.5)

    async def _deliver(self, box: Inbox, entries: list) -> None:
        partition = box.partition
        group, recovering = self.fetcher.group, box.position != NEW
        events = [
            Event(partition, xid, fields, group=group, recovering=recovering)
            for xid, fields in entries
            if fields is not None
        ]
        trimmed = (
            [xid for xid, fields in entries if fields is None] if len(events) < len(entries) else []
        )
        if box.position != NEW:
            box.position = Position.pending_after(entries[-1][0])
            # Read before and never acknowledged: a redelivery.
            self.fetcher.stats.partition(partition.number).redelivered += len(events)
        else:
            box.last_id = entries[-1][0]
        if trimmed:
            # Entries read before (by an owner that stopped) and trimmed since: a stream
            # with on_full="drop_oldest", or trimmed by another writer.
            log.error(
                "%d unprocessed events of %r were trimmed away before they could be read "
                "again; counted as lost (is partition_size too small for the backlog?)",
                len(trimmed),
                partition,
            )
            await self.source.drop(partition.id, trimmed)
        if events and partition.stream.has_schemas:
            # A producer may have started writing with a schema stored after we started.
            await retrying(lambda: partition.stream.admit(events), "loading new schemas")
        box.put(events)
