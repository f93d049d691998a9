"""The fetcher: fenced reads into the inboxes, pending entries first, full inboxes left
out, lost partitions reported, outages retried and bugs surfaced."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from runnel import App
from runnel.processing.acks import Acks
from runnel.processing.fetcher import Fetcher
from runnel.processing.inbox import Inbox
from runnel.store.log import NEW, PENDING, PartitionId
from runnel.stream import Stream
from runnel.types import Event
from tests.support.processing import OUTAGE, Log, Ping, processor_of, stats_of, until


async def noop(events):  # type: ignore[no-untyped-def]
    pass


class Running:
    def __init__(self, app: App, stream: Stream, log: Log, capacity: int = 10) -> None:
        self.lost: list[PartitionId] = []
        self.stats = stats_of(processor_of(app, stream, noop))
        self.fetcher = Fetcher(
            {}, log, lost=self.lost.append, stats=self.stats, group="proc", block_ms=20
        )
        self.inboxes = []
        for p in stream.partitions:
            box = Inbox(p, capacity, self.fetcher.wake_for(p))
            self.fetcher.inboxes[p.id] = box
            self.inboxes.append(box)
        log.owned = {p.id for p in stream.partitions}

    async def take(self, box: Inbox, n: int) -> list[Event]:
        """What a consumer does: wait for and pop ``n`` events."""
        got: list[Event] = []
        while len(got) < n:
            assert await box.wait()
            got.append(box.pop())
        return got


@pytest.fixture
async def running(app: App, stream: Stream, log: Log) -> AsyncIterator[Running]:
    run = Running(app, stream, log)
    task = asyncio.create_task(run.fetcher.run())
    yield run
    run.fetcher.stop()
    await task


@pytest.fixture
def log() -> Log:
    return Log()


async def test_pending_entries_come_first_then_new_ones(stream: Stream, log: Log, app: App) -> None:
    p0 = stream.partitions[0].id
    ids = log.append(p0, b"a", b"b", b"c", b"d")
    log.delivered[p0] = 2  # an earlier owner read two and never acknowledged them
    log.pending[p0] = ids[:2]
    run = Running(app, stream, log)
    task = asyncio.create_task(run.fetcher.run())
    box = run.inboxes[0]
    assert box.position == PENDING
    events = await run.take(box, 4)
    run.fetcher.stop()
    await task
    assert [e.xid for e in events] == ids
    assert [e.recovering for e in events] == [True, True, False, False]
    assert run.stats.partition(0).redelivered == 2
    assert box.position == NEW


async def test_new_entries_are_noticed_while_waiting(running: Running, log: Log) -> None:
    box = running.inboxes[1]
    await asyncio.sleep(0.01)  # the first reads came back empty: the lanes wait
    ids = log.append(box.partition.id, b"late")
    assert [e.xid for e in await running.take(box, 1)] == ids


async def test_a_full_inbox_is_left_out_of_reads(app: App, stream: Stream, log: Log) -> None:
    p0 = stream.partitions[0].id
    ids = log.append(p0, *[b"%d" % n for n in range(50)])
    run = Running(app, stream, log, capacity=4)
    task = asyncio.create_task(run.fetcher.run())
    box = run.inboxes[0]
    while len(box.items) < 4:
        await box.wait()
        await asyncio.sleep(0)
    reads = log.reads
    for _ in range(5):
        await asyncio.sleep(0.005)
    assert log.reads == reads, "nothing read while the inbox is full"
    assert len(box.items) < 8
    events = await run.take(box, 50)
    run.fetcher.stop()
    await task
    assert [e.xid for e in events] == ids


async def test_a_lost_partition_is_reported(running: Running, log: Log, stream: Stream) -> None:
    p1 = stream.partitions[1].id
    log.owned.discard(p1)
    log.append(p1, b"x")
    running.fetcher.look_again()
    await until(lambda: running.lost)
    assert running.lost[0] == p1


async def test_an_outage_is_retried_from_the_pending_entries(
    app: App, stream: Stream, log: Log
) -> None:
    """A read whose reply was lost may have delivered entries: the retry reads the
    pending ones, so nothing is skipped."""
    p0 = stream.partitions[0].id
    run = Running(app, stream, log)
    box = run.inboxes[0]
    box.position = NEW
    ids = log.append(p0, b"a", b"b")
    original = log.read

    async def delivered_then_failed(positions, count):  # type: ignore[no-untyped-def]
        log.read = original  # type: ignore[method-assign]
        await original(positions, count)
        raise OUTAGE

    log.read = delivered_then_failed  # type: ignore[method-assign]
    task = asyncio.create_task(run.fetcher.run())
    events = await run.take(box, 2)
    run.fetcher.stop()
    await task
    assert [e.xid for e in events] == ids
    assert all(e.recovering for e in events)


async def test_a_bug_in_a_read_stops_the_fetcher(app: App, stream: Stream, log: Log) -> None:
    run = Running(app, stream, log)
    log.append(stream.partitions[0].id, b"a")
    log.failures.append(TypeError("a bug"))
    with pytest.raises(BaseExceptionGroup) as caught:
        await run.fetcher.run()
    assert caught.group_contains(TypeError)


async def test_trimmed_entries_are_acknowledged_not_delivered(
    app: App, stream: Stream, log: Log
) -> None:
    p0 = stream.partitions[0].id
    ids = log.append(p0, b"a", b"b", b"c")
    log.delivered[p0] = 3
    log.pending[p0] = list(ids)
    log.entries[p0][1] = (ids[1], None)  # trimmed away before anyone processed it
    run = Running(app, stream, log)
    task = asyncio.create_task(run.fetcher.run())
    events = await run.take(run.inboxes[0], 2)
    run.fetcher.stop()
    await task
    assert [e.xid for e in events] == [ids[0], ids[2]]
    assert log.acked == {p0: [ids[1]]}


async def test_a_read_carries_finished_ids_only_where_the_lock_is_ours(
    stream: Stream, log: Log, app: App
) -> None:
    """Finished ids ride on the next read of their lane: acknowledged where the lock is
    ours; where it is not, refused, the partition reported lost and nothing counted as
    acknowledged. After a failed read they are given back to be sent again."""
    p0, p1 = (p.id for p in stream.partitions)
    run = Running(app, stream, log)
    woken: list[PartitionId] = []
    acks = []
    for box in run.inboxes:
        stats = run.stats.partition(box.partition.number)
        box.acks = Acks(box.partition.id, stats, log.commit, run.lost.append, woken.append)
        box.acks.batch = 10
        acks.append(box.acks)
    log.owned = {p0}  # p1's lock was lost
    for box in run.inboxes:
        box.position = NEW
    acks[0].add(b"1-0")
    acks[1].add(b"2-0")
    log.append(p0, b"a")
    log.failures.append(OUTAGE)  # the first read fails: the ids go back, the sink is woken
    task = asyncio.create_task(run.fetcher.run())
    await until(lambda: log.acked.get(p0) == [b"1-0"])
    assert woken and acks[0].ids == [] and acks[1].ids == []
    assert p1 in run.lost and p1 not in log.acked
    assert acks[0].stats.acked == 1 and acks[1].stats.acked == 0
    assert any(p1 in carried for carried in log.carried)
    run.fetcher.stop()
    await task


async def test_a_lane_reads_its_partitions_together_once_their_consumers_ran(
    app: App, log: Log
) -> None:
    """Two partitions of one lane out of step (one inbox full at the first read): the lane
    lets the consumer it just fed run before it reads again, so the next reads take both
    partitions at once, rather than each alone in turn (twice the reads for as much)."""
    four = app.stream("four", record=Ping, partition_by="key", partition_count=4)
    run = Running(app, four, log, capacity=4)
    p0, p2 = run.inboxes[0], run.inboxes[2]  # lane 0
    for box in run.inboxes:
        box.position = NEW
    for box in (p0, p2):
        log.append(box.partition.id, *[b"x"] * 40)
    p2.put([Event(p2.partition, b"0-%d" % n, {b"data": b"x"}, group="proc") for n in range(4)])
    read = log.read
    taken: list[set[int]] = []
    got0: list[Event] = []
    got2: list[Event] = []
    consumers: list[asyncio.Task[None]] = []

    async def consume(box: Inbox, got: list[Event]) -> None:
        while len(got) < 24:  # what a consumer does: all that is buffered, then wait
            assert await box.wait()
            while box.items:
                got.append(box.pop())

    async def recording(positions, count):  # type: ignore[no-untyped-def]
        taken.append({p.number for p in positions if p.number % 2 == 0})
        if not consumers:  # from the first read on: p2's consumer drains it meanwhile
            consumers.append(asyncio.create_task(consume(p0, got0)))
            consumers.append(asyncio.create_task(consume(p2, got2)))
        return await read(positions, count)

    log.read = recording  # type: ignore[method-assign]
    task = asyncio.create_task(run.fetcher.run())
    await until(lambda: len(consumers) == 2)
    await asyncio.gather(*consumers)
    run.fetcher.stop()
    await task
    lane = [t for t in taken if t]
    assert lane[0] == {0}, "p2's inbox was full at the first read"
    assert all(t == {0, 2} for t in lane[1:5]), lane
