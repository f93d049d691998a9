"""The runner: one consumer per assigned partition, one fetcher for them all, revoked
partitions finishing their iteration (within the grace period) and acknowledging."""

from __future__ import annotations

import asyncio
from typing import Any

from runnel import App
from runnel.processing.acks import Acks
from runnel.processing.consumer import Consumer
from runnel.processing.fetcher import Fetcher
from runnel.processing.inbox import Inbox
from runnel.processing.runner import Runner
from runnel.stream import Stream
from runnel.types import Partition
from tests.support.processing import Log, held_lease, processor_of, stats_of, until


class Wired:
    def __init__(
        self, app: App, stream: Stream, func: Any, grace_period: float = 5, partitions: int = 1
    ) -> None:
        self.log = Log()
        self.log.owned = {p.id for p in stream.partitions}
        self.processor = processor_of(app, stream, func)
        self.stats = stats_of(self.processor)
        self.lease = held_lease()
        self.halted: list[BaseException] = []
        fetcher = Fetcher(
            {}, self.log, lost=lambda _: None, stats=self.stats, group="proc", block_ms=20
        )
        self.runner = Runner(
            fetcher,
            self.consumer_for,
            prefetch=10,
            grace_period=grace_period,
            name="proc",
            partitions=partitions,
        )

    def consumer_for(self, partition: Partition, inbox: Inbox) -> Consumer:
        stats = self.stats.partition(partition.number)
        acks = Acks(partition.id, stats, self.log.commit, lambda _: None, lambda _: None)
        return Consumer(
            self.processor,
            partition,
            inbox,
            acks,
            self.lease,
            halt=self.halted.append,
            quarantine=_nothing,
        )


async def _nothing(*args: Any) -> None:
    pass


async def test_assigned_partitions_are_read_processed_and_acknowledged(
    app: App, stream: Stream
) -> None:
    seen: list[tuple[int, bytes]] = []

    async def proc(events):  # type: ignore[no-untyped-def]
        async for event in events:
            seen.append((event.partition.number, event.xid))

    wired = Wired(app, stream, proc)
    p0, p1 = stream.partitions
    a = wired.log.append(p0.id, b"a", b"b")
    b = wired.log.append(p1.id, b"c")
    running = asyncio.create_task(wired.runner.run())
    await wired.runner.assign([p0, p1])
    await wired.runner.assign([p0])  # already running: nothing new
    assert wired.runner.owned == {0, 1}
    await until(lambda: len(seen) == 3)
    wired.runner.stop()
    await running
    assert sorted(seen) == sorted([(0, a[0]), (0, a[1]), (1, b[0])])
    assert wired.log.acked == {p0.id: a, p1.id: b}
    assert wired.runner.owned == set() and not wired.runner.inboxes


async def test_a_revoked_partition_finishes_its_iteration(app: App, stream: Stream) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def proc(events):  # type: ignore[no-untyped-def]
        async for _ in events:
            started.set()
            await release.wait()

    wired = Wired(app, stream, proc)
    p0 = stream.partitions[0]
    ids = wired.log.append(p0.id, b"a", b"b")
    running = asyncio.create_task(wired.runner.run())
    await wired.runner.assign([p0])
    await started.wait()
    revoking = asyncio.create_task(wired.runner.revoke([0]))
    await asyncio.sleep(0)
    assert wired.runner.owned == set()
    release.set()
    await revoking
    assert wired.log.acked == {p0.id: ids[:1]}, "the one in flight; the next stays pending"
    wired.runner.stop()
    await running


async def test_a_partition_past_its_grace_period_is_cancelled(app: App, stream: Stream) -> None:
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def proc(events):  # type: ignore[no-untyped-def]
        async for _ in events:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

    wired = Wired(app, stream, proc, grace_period=0)
    p0 = stream.partitions[0]
    wired.log.append(p0.id, b"a")
    running = asyncio.create_task(wired.runner.run())
    await wired.runner.assign([p0])
    await started.wait()
    await wired.runner.revoke([0])
    assert cancelled == [True]
    assert wired.log.acked == {}, "not finished: delivered again to the next owner"
    wired.runner.stop()
    await running


async def test_nothing_is_assigned_once_quiet(app: App, stream: Stream) -> None:
    async def proc(events):  # type: ignore[no-untyped-def]
        async for _ in events:
            pass

    wired = Wired(app, stream, proc)
    running = asyncio.create_task(wired.runner.run())
    wired.runner.quiesce()
    await wired.runner.assign(list(stream.partitions))
    assert wired.runner.owned == set()
    wired.runner.stop()
    await running


async def test_an_executor_owning_part_of_the_stream_buffers_its_share_of_the_whole(
    app: App, stream: Stream
) -> None:
    """Owning one partition of two, an inbox holds twice ``prefetch_count`` (what a sole
    owner buffers over all partitions), so reads stay as large; back to ``prefetch_count``
    once it owns both, and never below what ``take(n)`` needs."""
    gate = asyncio.Event()

    async def proc(events):  # type: ignore[no-untyped-def]
        async for _ in events.take(15, within=0) if events.partition.number else events:
            await gate.wait()

    wired = Wired(app, stream, proc, grace_period=0, partitions=stream.partition_count)
    p0, p1 = stream.partitions
    wired.log.append(p0.id, *[b"%d" % i for i in range(40)])
    running = asyncio.create_task(wired.runner.run())
    await wired.runner.assign([p0])
    assert wired.runner.inboxes[p0.id].capacity == 20
    await until(lambda: len(wired.runner.inboxes[p0.id].items) >= 19)  # one read of 20
    await wired.runner.assign([p1])
    await until(lambda: wired.runner.inboxes[p1.id].least == 30)
    assert wired.runner.inboxes[p0.id].capacity == 10
    assert wired.runner.inboxes[p1.id].capacity == 30  # take(15): two batches
    await wired.runner.revoke([0], graceful=False)
    assert wired.runner.inboxes[p1.id].capacity == 30
    gate.set()
    wired.runner.stop()
    await running
