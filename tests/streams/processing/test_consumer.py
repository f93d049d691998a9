"""A partition's consumer and its ``Events``: the processor function fed from the inbox,
finished events acknowledged, the exception policies applied, the lease respected."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from runnel import App
from runnel.processing.acks import Acks
from runnel.processing.consumer import Consumer
from runnel.processing.inbox import Inbox
from runnel.processing.lease import Lease
from runnel.store.log import PartitionId
from runnel.stream import Stream
from runnel.types import Event
from tests.support.processing import Log, events_of, held_lease, processor_of, stats_of, until


class Wired:
    """One consumer with its collaborators, all in process."""

    def __init__(
        self, app: App, stream: Stream, func: Any, lease: Lease | None = None, **options: Any
    ) -> None:
        self.processor = processor_of(app, stream, func, **options)
        self.partition = stream.partitions[0]
        self.log = Log()
        self.log.owned = {self.partition.id}
        self.halted: list[BaseException] = []
        self.quarantined: list[tuple[PartitionId, str | None, str]] = []
        self.inbox = Inbox(self.partition, 10, asyncio.Event())
        stats = stats_of(self.processor).partition(self.partition.number)
        acks = Acks(self.partition.id, stats, self.log.commit, lambda _: None, lambda _: None)
        self.consumer = Consumer(
            self.processor,
            self.partition,
            self.inbox,
            acks,
            lease or held_lease(),
            halt=self.halted.append,
            quarantine=self.quarantine,
        )

    async def quarantine(self, partition: PartitionId, entry_id: str | None, error: str) -> None:
        self.quarantined.append((partition, entry_id, error))

    def feed(self, *xids: bytes) -> list[Event]:
        events = events_of(self.partition, *xids)
        self.inbox.put(events)
        return events

    @property
    def acked(self) -> list[bytes]:
        return self.log.acked.get(self.partition.id, [])


async def test_finished_events_are_acknowledged_in_order(app: App, stream: Stream) -> None:
    seen: list[bytes] = []

    async def proc(events):  # type: ignore[no-untyped-def]
        async for event in events:
            seen.append(event.xid)

    wired = Wired(app, stream, proc)
    task = asyncio.create_task(wired.consumer.run())
    wired.feed(b"1-0", b"2-0", b"3-0")
    await until(lambda: len(seen) == 3)
    wired.consumer.stop()
    await task
    assert seen == [b"1-0", b"2-0", b"3-0"]
    assert wired.acked == seen


async def test_the_event_in_flight_at_a_stop_is_finished(app: App, stream: Stream) -> None:
    release = asyncio.Event()

    async def proc(events):  # type: ignore[no-untyped-def]
        async for _ in events:
            await release.wait()

    wired = Wired(app, stream, proc)
    task = asyncio.create_task(wired.consumer.run())
    wired.feed(b"1-0", b"2-0")
    await until(lambda: wired.inbox.items and len(wired.inbox.items) == 1)
    wired.consumer.stop()
    release.set()
    await task
    assert wired.acked == [b"1-0"], "finished, acknowledged; the next one was not started"


async def test_ignore_acknowledges_the_failed_event_and_goes_on(app: App, stream: Stream) -> None:
    async def proc(events):  # type: ignore[no-untyped-def]
        async for event in events:
            if event.xid == b"1-0":
                raise ValueError("bad event")

    wired = Wired(app, stream, proc, exception_policy="ignore")
    task = asyncio.create_task(wired.consumer.run())
    wired.feed(b"1-0", b"2-0")
    await until(lambda: not wired.inbox.items)
    wired.consumer.stop()
    await task
    assert wired.acked == [b"1-0", b"2-0"]
    assert not wired.halted


async def test_halt_stops_the_consumer_and_tells_the_executor(app: App, stream: Stream) -> None:
    async def proc(events):  # type: ignore[no-untyped-def]
        async for event in events:
            if event.xid == b"2-0":
                raise ValueError("bad event")

    wired = Wired(app, stream, proc, exception_policy="halt")
    wired.feed(b"1-0", b"2-0", b"3-0")
    await wired.consumer.run()  # returns on its own
    assert [repr(e) for e in wired.halted] == [repr(ValueError("bad event"))]
    assert wired.acked == [b"1-0"], "the failed event stays pending"


async def test_quarantine_records_the_event_and_stops_the_partition(
    app: App, stream: Stream
) -> None:
    async def proc(events):  # type: ignore[no-untyped-def]
        async for _ in events:
            raise ValueError("poison")

    wired = Wired(app, stream, proc, exception_policy="quarantine")
    wired.feed(b"7-0")
    await wired.consumer.run()
    assert wired.consumer.poisoned
    assert wired.quarantined == [(wired.partition.id, "7-0", "ValueError: poison")]
    assert wired.acked == [] and not wired.halted


async def test_retry_tries_again_then_falls_back(app: App, stream: Stream) -> None:
    tries: list[bytes] = []

    async def proc(events):  # type: ignore[no-untyped-def]
        async for event in events:
            tries.append(event.xid)
            if event.xid == b"1-0":
                raise ValueError("flaky")

    wired = Wired(
        app,
        stream,
        proc,
        exception_policy="retry",
        retries=2,
        retry_backoff=0.001,
        fallback="ignore",
    )
    task = asyncio.create_task(wired.consumer.run())
    wired.feed(b"1-0", b"2-0")
    await until(lambda: b"2-0" in tries)
    wired.consumer.stop()
    await task
    assert tries == [b"1-0", b"1-0", b"1-0", b"2-0"], "tried 1 + 2 times, in order"
    assert wired.acked == [b"1-0", b"2-0"]


async def test_nothing_starts_without_a_valid_lease(app: App, stream: Stream) -> None:
    """After a pause or while the store is unreachable, a consumer waits for a heartbeat
    to confirm its lock before starting another iteration."""
    seen: list[bytes] = []

    async def proc(events):  # type: ignore[no-untyped-def]
        async for event in events:
            seen.append(event.xid)

    lease = Lease(3600.0)
    wired = Wired(app, stream, proc, lease=lease)
    task = asyncio.create_task(wired.consumer.run())
    wired.feed(b"1-0")
    for _ in range(10):
        await asyncio.sleep(0)
    assert seen == []
    lease.extended(time.monotonic())
    await until(lambda: seen)
    wired.consumer.stop()
    await task
    assert seen == [b"1-0"]


async def test_batches_are_acknowledged_after_their_iteration(app: App, stream: Stream) -> None:
    batches: list[list[bytes]] = []

    async def proc(events):  # type: ignore[no-untyped-def]
        async for batch in events.take(2, within=0):
            batches.append([e.xid for e in batch])

    wired = Wired(app, stream, proc)
    task = asyncio.create_task(wired.consumer.run())
    wired.feed(b"1-0", b"2-0", b"3-0")
    await until(lambda: sum(map(len, batches)) == 3)
    wired.consumer.stop()
    await task
    assert batches == [[b"1-0", b"2-0"], [b"3-0"]]
    assert wired.acked == [b"1-0", b"2-0", b"3-0"]
