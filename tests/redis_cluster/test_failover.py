"""A master killed, or a slot moved, while a worker processes and a producer sends: every
event whose send returned is processed (at least once), in order per key."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from redis.crc import key_slot

from runnel import App, Record
from runnel.exceptions import RunnelError
from runnel_redis.layout import Cluster
from tests.support.apps import FAST, Running, eventually, keys_by_partition
from tests.support.redis_cluster import Node, RedisClusterProcesses

COUNT = 6


class Ping(Record):
    key: str
    n: int


def declare(
    url: str, seen: list[tuple[str, int]], name: str = "fo", **settings: object
) -> tuple[App, object]:
    app = App(name=name, redis_url=url, **{**FAST, "default_lock_expiry": 3, **settings})
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


@dataclass
class Load:
    """A worker processing and a producer sending, while a test disrupts the cluster."""

    pings: Any
    sent: list[int]
    running: Running

    @property
    def first_key(self) -> str:
        """Partition 0's stream key (the one the tests disrupt)."""
        return str(self.pings.partitions[0].key)

    async def sends_go_on(self, count: int, what: str) -> None:
        before = len(self.sent)
        await self.running.until(lambda: len(self.sent) >= before + count, what)


@contextlib.asynccontextmanager
async def under_load(url: str, name: str = "fo", **settings: object) -> AsyncIterator[Load]:
    """Yields once processing has started; after the test's steps, stops the producer and
    checks that every event whose send returned was processed, in order per key."""
    seen: list[tuple[str, int]] = []
    app, pings = declare(url, seen, name, **settings)
    routing = keys_by_partition(pings, lambda k: Ping(key=k, n=0), COUNT)  # type: ignore[attr-defined]
    sent: list[int] = []
    stop = asyncio.Event()
    async with Running(app) as running:
        producer = asyncio.create_task(produce(pings, routing, sent, stop))
        await eventually(lambda: len(seen) >= 50, "processing started")
        yield Load(pings, sent, running)
        stop.set()
        await producer
        await running.until(lambda: set(sent) <= {n for _, n in seen}, "all sent processed")
        assert await running.stop() == 0
    check(seen, sent)
    with contextlib.suppress(Exception):
        await app.store.aclose()


async def test_a_master_killed_mid_stream_loses_nothing_sent_with_wait_replicas(
    redis_cluster_replicas: RedisClusterProcesses,
) -> None:
    cluster = redis_cluster_replicas
    async with under_load(cluster.url, wait_replicas=1, wait_timeout=2) as load:
        killed = await asyncio.to_thread(cluster.kill_master_of, load.first_key)
        # The promoted replica has no replica of its own: its sends raise NotReplicated
        # (they are in Redis, but not known to be sent) until the killed node is back.
        await asyncio.to_thread(cluster.revive, killed)
        await load.sends_go_on(100, "sends go on after the failover")


async def test_a_slot_moved_during_processing_loses_nothing(
    redis_cluster: RedisClusterProcesses,
) -> None:
    cluster = redis_cluster
    async with under_load(cluster.url) as load:
        source = cluster.master_of(load.first_key)
        target = next(m for m in cluster.masters() if m.port != source.port)
        await asyncio.to_thread(cluster.migrate_slot_of, load.first_key, target)
        assert cluster.master_of(load.first_key).port == target.port
        await load.sends_go_on(100, "sends go on after the move")


async def test_a_slot_left_half_moved_then_finished_loses_nothing(
    redis_cluster: RedisClusterProcesses,
) -> None:
    """While partition 0's slot is half moved (one of its keys on each master), commands
    on it meet ASK, and scripts over its two keys TRYAGAIN (retried by the client, then
    by the worker); once the move is finished everything sent is processed."""
    cluster = redis_cluster
    async with under_load(cluster.url) as load:
        slot = key_slot(load.first_key.encode())
        source = cluster.master_of(load.first_key)
        target = next(m for m in cluster.masters() if m.port != source.port)
        cluster.begin_migration(slot, target)
        cluster.move_keys(slot, source, target, limit=1)  # one of the stream and the lock
        await load.sends_go_on(50, "sends go on, half moved")
        await asyncio.to_thread(cluster.move_keys, slot, source, target)
        await asyncio.to_thread(cluster.finish_migration, slot, target)
        await load.sends_go_on(50, "sends go on after the move")


def low_slot_app(cluster: RedisClusterProcesses, within: int) -> tuple[str, Node, Node, int]:
    """An app name whose partition 0 is among the first ``within`` slots of its master,
    that master, another master whose slots all lie above those, and how many slots
    ``redis-cli --cluster reshard`` must move (it takes a master's slots lowest first)
    to take partition 0's along."""
    layout = Cluster()
    masters = {line.port: line.slots for line in cluster.alive()[0].view() if line.slots}
    for i in range(10_000):
        name = f"rs{i}"
        slot = key_slot(layout.partition(name, "pings", 0).encode())
        source = next(port for port, slots in masters.items() if slot in slots)
        ranked = sorted(masters[source])
        count = ranked.index(slot) + 1
        if count > within:
            continue
        moved = ranked[:count]
        for port, slots in masters.items():
            if port != source and min(slots) > moved[-1]:
                return name, cluster.node(source), cluster.node(port), count
    raise AssertionError("no app name fits")


async def test_a_reshard_with_redis_cli_during_processing_loses_nothing(
    redis_cluster: RedisClusterProcesses,
) -> None:
    """``redis-cli --cluster reshard`` moves partition 0's slot (and the few below it) to
    another master while events flow, then moves them back."""
    cluster = redis_cluster
    name, source, target, count = low_slot_app(cluster, within=40)
    async with under_load(cluster.url, name) as load:
        await asyncio.to_thread(cluster.reshard, count, source, target)
        assert cluster.master_of(load.first_key).port == target.port
        await load.sends_go_on(100, "sends go on after the reshard")
        # The moved slots are now the target's lowest: the same count goes back.
        await asyncio.to_thread(cluster.reshard, count, target, source)
        assert cluster.master_of(load.first_key).port == source.port
        await load.sends_go_on(50, "sends go on after the reshard back")
