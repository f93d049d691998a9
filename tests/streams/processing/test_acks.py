"""Acknowledgements: coalesced per partition, sent by one acknowledger, given back when a
send fails, and reported when the store says a partition is no longer ours."""

from __future__ import annotations

import asyncio

import pytest

from runnel import App
from runnel.processing.acks import Acknowledger, Acks
from runnel.store.log import PartitionId
from runnel.stream import Stream
from runnel.tables.partition import PartitionState
from tests.support.processing import OUTAGE, Log, processor_of, stats_of, until


async def noop(events):  # type: ignore[no-untyped-def]
    pass


def wire(app: App, stream: Stream, log: Log) -> tuple[Acknowledger, list[Acks], list[PartitionId]]:
    stats = stats_of(processor_of(app, stream, noop))
    lost: list[PartitionId] = []
    acknowledger = Acknowledger(log.commit, lost.append)
    acks = [
        Acks(p.id, stats.partition(p.number), log.commit, lost.append, acknowledger.wake)
        for p in stream.partitions
    ]
    log.owned = {p.id for p in stream.partitions}
    return acknowledger, acks, lost


async def test_the_acknowledger_sends_what_every_partition_recorded(
    app: App, stream: Stream
) -> None:
    log = Log()
    acknowledger, (a0, a1), lost = wire(app, stream, log)
    running = asyncio.create_task(acknowledger.run())
    for xid in (b"1-0", b"2-0"):
        a0.add(xid)
    a1.add(b"3-0")
    await until(lambda: a0.stats.acked == 2 and a1.stats.acked == 1)
    running.cancel()
    assert log.acked == {a0.key: [b"1-0", b"2-0"], a1.key: [b"3-0"]}
    assert a0.stats.processed == 2 and not lost


async def test_a_failed_send_gives_the_ids_back_and_tries_again(app: App, stream: Stream) -> None:
    log = Log()
    acknowledger, (a0, _), _ = wire(app, stream, log)
    log.failures.append(OUTAGE)
    running = asyncio.create_task(acknowledger.run())
    a0.add(b"1-0")
    await until(lambda: a0.stats.acked == 1)
    running.cancel()
    assert log.acked == {a0.key: [b"1-0"]}
    assert a0.stats.processed == 1, "counted once, not once per try"


async def test_a_bug_in_the_sink_is_not_retried(app: App, stream: Stream) -> None:
    log = Log()
    acknowledger, (a0, _), _ = wire(app, stream, log)
    log.failures.append(TypeError("a bug"))
    a0.add(b"1-0")
    with pytest.raises(TypeError):
        await acknowledger.run()
    assert a0.ids == [b"1-0"], "kept for whoever drains the partition"


async def test_a_lost_partition_is_reported_and_not_counted(app: App, stream: Stream) -> None:
    log = Log()
    acknowledger, (a0, a1), lost = wire(app, stream, log)
    log.owned = {a1.key}
    running = asyncio.create_task(acknowledger.run())
    a0.add(b"1-0")
    a1.add(b"2-0")
    await until(lambda: lost and a1.stats.acked)
    running.cancel()
    assert lost == [a0.key]
    assert a0.stats.acked == 0 and a0.key not in log.acked


async def test_drain_sends_the_rest_itself_through_an_outage(app: App, stream: Stream) -> None:
    """No acknowledger runs: the consumer giving its partition up sends what is left."""
    log = Log()
    _, (a0, _), _ = wire(app, stream, log)
    a0.add(b"1-0")
    a0.add(b"2-0")
    log.failures.append(OUTAGE)
    assert await a0.drain() is True
    assert log.acked == {a0.key: [b"1-0", b"2-0"]}
    assert a0.draining


async def test_drain_says_when_the_partition_was_lost(app: App, stream: Stream) -> None:
    log = Log()
    _, (a0, _), lost = wire(app, stream, log)
    log.owned = set()
    a0.add(b"1-0")
    assert await a0.drain() is False
    assert lost == [a0.key]


async def test_drain_waits_for_a_send_in_flight(app: App, stream: Stream) -> None:
    log = Log()
    _, (a0, _), _ = wire(app, stream, log)
    a0.add(b"1-0")
    taken = a0.take().ids  # an acknowledger's send, in flight
    draining = asyncio.create_task(a0.drain())
    await asyncio.sleep(0)
    assert not draining.done()
    a0.add(b"2-0")
    a0.done()  # that send completed
    assert await draining is True
    assert taken == [b"1-0"] and log.acked == {a0.key: [b"2-0"]}


async def test_table_writes_wait_for_a_read_carrying_their_partitions(
    app: App, stream: Stream
) -> None:
    """Two sends of one partition's table writes, on two connections, could be applied in
    either order, an older value stored over a newer one: while a read carries a
    partition's writes, the acknowledger leaves that partition alone, and sends what it
    recorded meanwhile once the read is done."""
    counts = app.table("counts", source=stream, default=0)
    store = app.store.table_store(app.name)
    assert store is not None
    log = Log()
    acknowledger, (a0, _), _ = wire(app, stream, log)
    a0.state = PartitionState(stream.partitions[0], [counts], store, "proc", 100)
    a0.commits_ride = True
    a0.add(b"1-0")
    assert a0.rides
    carried = a0.take()  # a read carrying it, in flight
    a0.add(b"2-0")
    assert not a0.rides, "a second read may not carry the partition either"
    a0.nudge()
    running = asyncio.create_task(acknowledger.run())
    for _ in range(5):
        await asyncio.sleep(0)
    assert log.acked == {}, "the acknowledger sent while the read was in flight"
    a0.done()  # the read came back
    a0.committed(carried)
    await until(lambda: log.acked == {a0.key: [b"2-0"]})
    running.cancel()
