"""Plain in-process collaborators for the parts of ``runnel.processing``: a partitioned log
with one consumer group and fenced reads and acknowledgements, and a lease that holds.
No Redis server, no network."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

from runnel import App, Record
from runnel.exceptions import Unavailable
from runnel.metrics.stats import ProcessorStats
from runnel.processing.lease import Lease
from runnel.processor import Processor
from runnel.store.coordination import ReadResult
from runnel.store.log import PartitionId, Position
from runnel.store.state import Commit
from runnel.stream import Stream
from runnel.types import Event, Partition


class Ping(Record):
    key: str
    n: int


def _seq(xid: bytes) -> int:
    return int(xid.split(b"-")[0])


class Log:
    """Partitions of entries, read by one group as one consumer: what the fetcher reads
    and the acknowledgements go to. Only the partitions in ``owned`` may be read or
    acknowledged; the others are reported lost, as a fenced store does."""

    def __init__(self) -> None:
        self.entries: dict[PartitionId, list[tuple[bytes, dict[bytes, bytes] | None]]] = {}
        self.delivered: dict[PartitionId, int] = {}  # how many were delivered to the group
        self.pending: dict[PartitionId, list[bytes]] = {}
        self.acked: dict[PartitionId, list[bytes]] = {}
        self.owned: set[PartitionId] = set()
        self.failures: list[BaseException] = []  # raised by the next calls, one each
        self.reads = 0
        self.carried: list[dict[PartitionId, list[bytes]]] = []  # ids sent with reads
        self._appended = asyncio.Event()
        self._seq = 0

    def append(self, partition: PartitionId, *values: bytes) -> list[bytes]:
        ids = []
        for value in values:
            self._seq += 1
            xid = b"%d-0" % self._seq
            self.entries.setdefault(partition, []).append((xid, {b"data": value}))
            ids.append(xid)
        self._appended.set()
        return ids

    def _fail(self) -> None:
        if self.failures:
            raise self.failures.pop(0)

    # The fetcher's Source.

    async def read(self, positions: Mapping[PartitionId, Position], count: int) -> ReadResult:
        await asyncio.sleep(0)
        self._fail()
        self.reads += 1
        result = ReadResult()
        for pid, position in positions.items():
            if pid not in self.owned:
                result.lost.append(pid)
                continue
            entries = self.entries.get(pid, [])
            if position.new:
                start = self.delivered.get(pid, 0)
                got = entries[start : start + count]
                self.delivered[pid] = start + len(got)
                self.pending.setdefault(pid, []).extend(xid for xid, _ in got)
            else:
                after = _seq(position.after) if position.after is not None else -1
                wanted = [x for x in self.pending.get(pid, []) if _seq(x) > after][:count]
                got = [(xid, f) for xid, f in entries if xid in wanted]
            result.entries.append((pid, list(got)))
        return result

    async def last_delivered(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, bytes]:
        self._fail()
        out = {}
        for pid in partitions:
            n = self.delivered.get(pid, 0)
            if n:
                out[pid] = self.entries[pid][n - 1][0]
        return out

    async def wait_for_new(self, after: Mapping[PartitionId, bytes | None], block_ms: int) -> bool:
        def newer() -> bool:
            for pid, xid in after.items():
                entries = self.entries.get(pid, [])
                if entries and (xid is None or _seq(entries[-1][0]) > _seq(xid)):
                    return True
            return False

        await asyncio.sleep(0)  # a store call always yields, even when it answers at once
        self._appended.clear()
        if newer():
            return True
        try:
            async with asyncio.timeout(block_ms / 1000):
                await self._appended.wait()
        except TimeoutError:
            return False
        return newer()

    async def drop(self, partition: PartitionId, ids: Sequence[bytes]) -> None:
        await self.ack({partition: ids})

    # The ack sink.

    async def read_and_ack(
        self,
        positions: Mapping[PartitionId, Position],
        count: int,
        ids: Mapping[PartitionId, Sequence[bytes]],
    ) -> tuple[ReadResult, list[PartitionId]]:
        self.carried.append({p: list(x) for p, x in ids.items()})
        lost = await self.ack(ids)
        return await self.read(positions, count), lost

    async def commit(self, commits: Mapping[PartitionId, Commit]) -> list[PartitionId]:
        return await self.ack({p: c.ids for p, c in commits.items()})

    async def ack(self, ids: Mapping[PartitionId, Sequence[bytes]]) -> list[PartitionId]:
        await asyncio.sleep(0)
        self._fail()
        lost = []
        for pid, xids in ids.items():
            if pid not in self.owned:
                lost.append(pid)
                continue
            self.acked.setdefault(pid, []).extend(xids)
            self.pending[pid] = [x for x in self.pending.get(pid, []) if x not in xids]
        return lost


OUTAGE = Unavailable("the store went away for a moment")


def processor_of(app: App, stream: Stream, func: Any, **options: Any) -> Processor:
    decorated = app.processor(stream, name="proc", **options)(func)
    proc: Processor = decorated.__runnel_processor__
    return proc


def stats_of(processor: Processor) -> ProcessorStats:
    return ProcessorStats(processor, enabled=False)


def held_lease() -> Lease:
    """A lease the heartbeat just extended, for an hour."""
    lease = Lease(3600.0)
    lease.extended(time.monotonic())
    return lease


def events_of(partition: Partition, *xids: bytes) -> list[Event]:
    return [Event(partition, xid, {b"data": b"x"}, group="proc") for xid in xids]


HANG_GUARD = 20.0
"""Upper bound for any single wait; reaching it means the test hung."""


async def until(check: Any) -> None:
    """Let the loop run until ``check()`` is true."""
    async with asyncio.timeout(HANG_GUARD):
        while True:
            if check():
                return
            await asyncio.sleep(0.001)
