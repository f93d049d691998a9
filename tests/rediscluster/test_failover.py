"""A master killed, or a slot moved, while a worker processes and a producer sends: every
event whose send returned is processed (at least once), in order per key."""

from __future__ import annotations

import asyncio
import contextlib

from redis.crc import key_slot

from runnel import App, Record
from runnel.exceptions import RunnelError
from tests.integration.conftest import FAST, Running, eventually, keys_by_partition
from tests.rediscluster.cluster import RedisClusterProcesses

COUNT = 6


class Ping(Record):
    key: str
    n: int


def declare(url: str, seen: list[tuple[str, int]], **settings: object) -> tuple[App, object]:
    app = App(name="fo", redis_url=url, **{**FAST, "default_lock_expiry": 3, **settings})
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=COUNT)

    @app.processor(pings, name="proc")
    async def proc(events):
        async for ping in events.records():
            seen.append((ping.key, ping.n))

    return app, pings


async def produce(pings, routing: list[str], sent: list[int], stop: asyncio.Event) -> None:
    """Send one small batch after another; remember the events whose send returned."""
    n = 0
    while not stop.is_set():
        batch = [Ping(key=routing[(n + i) % len(routing)], n=n + i) for i in range(5)]
        try:
            await pings.send(*batch)
            sent.extend(p.n for p in batch)
        except (RunnelError, OSError, Exception):  # a failover under way: not known to be sent
            await asyncio.sleep(0.05)
        n += 5
        await asyncio.sleep(0.01)


def check(seen: list[tuple[str, int]], sent: list[int]) -> None:
    got = {n for _, n in seen}
    assert set(sent) <= got, f"lost: {sorted(set(sent) - got)[:10]}"
    by_key: dict[str, list[int]] = {}
    for key, n in seen:
        by_key.setdefault(key, []).append(n)
    for key, ns in by_key.items():
        firsts = list(dict.fromkeys(ns))  # redeliveries (at least once) repeat a tail
        assert firsts == sorted(firsts), key


async def test_a_master_killed_mid_stream_loses_nothing_sent_with_wait_replicas(
    redis_cluster_replicas: RedisClusterProcesses,
) -> None:
    cluster = redis_cluster_replicas
    seen: list[tuple[str, int]] = []
    app, pings = declare(cluster.url, seen, wait_replicas=1, wait_timeout=2)
    routing = keys_by_partition(pings, lambda k: Ping(key=k, n=0), COUNT)  # type: ignore[attr-defined]
    sent: list[int] = []
    stop = asyncio.Event()
    async with Running(app) as running:
        producer = asyncio.create_task(produce(pings, routing, sent, stop))
        await eventually(lambda: len(seen) >= 50, "processing started")
        victim = pings.partitions[0].key  # type: ignore[attr-defined]
        killed = await asyncio.to_thread(cluster.kill_master_of, victim)
        # The promoted replica has no replica of its own: its sends raise NotReplicated
        # (they are in Redis, but not known to be sent) until the killed node is back.
        await asyncio.to_thread(cluster.revive, killed)
        before = len(sent)
        await running.until(lambda: len(sent) >= before + 100, "sends go on after the failover")
        stop.set()
        await producer
        await running.until(lambda: set(sent) <= {n for _, n in seen}, "all sent processed")
        assert await running.stop() == 0
    check(seen, sent)
    with contextlib.suppress(Exception):
        await app.transport.aclose()


async def test_a_slot_moved_during_processing_loses_nothing(
    redis_cluster: RedisClusterProcesses,
) -> None:
    cluster = redis_cluster
    seen: list[tuple[str, int]] = []
    app, pings = declare(cluster.url, seen)
    routing = keys_by_partition(pings, lambda k: Ping(key=k, n=0), COUNT)  # type: ignore[attr-defined]
    sent: list[int] = []
    stop = asyncio.Event()
    async with Running(app) as running:
        producer = asyncio.create_task(produce(pings, routing, sent, stop))
        await eventually(lambda: len(seen) >= 50, "processing started")
        moved = pings.partitions[0].key  # type: ignore[attr-defined]
        source = cluster.master_of(moved)
        target = next(m for m in cluster.masters() if m.port != source.port)
        await asyncio.to_thread(cluster.migrate_slot_of, moved, target)
        assert cluster.master_of(moved).port == target.port
        before = len(sent)
        await running.until(lambda: len(sent) >= before + 100, "sends go on after the move")
        stop.set()
        await producer
        await running.until(lambda: set(sent) <= {n for _, n in seen}, "all sent processed")
        assert await running.stop() == 0
    check(seen, sent)
    await app.transport.aclose()


async def test_a_slot_left_half_moved_then_finished_loses_nothing(
    redis_cluster: RedisClusterProcesses,
) -> None:
    """While partition 0's slot is half moved (one of its keys on each master), commands
    on it meet ASK, and scripts over its two keys TRYAGAIN (retried by the client, then
    by the worker); once the move is finished everything sent is processed."""
    cluster = redis_cluster
    seen: list[tuple[str, int]] = []
    app, pings = declare(cluster.url, seen)
    routing = keys_by_partition(pings, lambda k: Ping(key=k, n=0), COUNT)  # type: ignore[attr-defined]
    sent: list[int] = []
    stop = asyncio.Event()
    async with Running(app) as running:
        producer = asyncio.create_task(produce(pings, routing, sent, stop))
        await eventually(lambda: len(seen) >= 50, "processing started")
        moved = pings.partitions[0].key  # type: ignore[attr-defined]
        slot = key_slot(moved.encode())
        source = cluster.master_of(moved)
        target = next(m for m in cluster.masters() if m.port != source.port)
        cluster.begin_migration(slot, target)
        cluster.move_keys(slot, source, target, limit=1)  # one of the stream and the lock
        before = len(sent)
        await running.until(lambda: len(sent) >= before + 50, "sends go on, half moved")
        await asyncio.to_thread(cluster.move_keys, slot, source, target)
        await asyncio.to_thread(cluster.finish_migration, slot, target)
        before = len(sent)
        await running.until(lambda: len(sent) >= before + 50, "sends go on after the move")
        stop.set()
        await producer
        await running.until(lambda: set(sent) <= {n for _, n in seen}, "all sent processed")
        assert await running.stop() == 0
    check(seen, sent)
    await app.transport.aclose()
