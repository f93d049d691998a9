"""Streams on a real Redis Cluster (``redis+cluster://``): send, process, acknowledge,
status, per-key order, workers sharing partitions, leader election, wait_replicas."""

from __future__ import annotations

import asyncio

import pytest
from redis.crc import key_slot

from runnel import App, Record
from runnel.cli.status import status_report
from runnel.exceptions import Misconfigured, NotReplicated
from runnel.processing.worker import Worker
from runnel.transport import PartitionId
from runnel_redis.layout import Cluster
from tests.integration.conftest import FAST, Running
from tests.rediscluster.cluster import RedisClusterProcesses


class Ping(Record):
    key: str
    n: int


def make_app(url: str, name: str = "shop", **settings: object) -> App:
    return App(name=name, redis_url=url, **{**FAST, **settings})


async def run_until(worker: Worker, done: asyncio.Event, limit: float = 60) -> int:
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(limit):
            await done.wait()
    finally:
        worker.stop()
    return await task


def spread(cluster: RedisClusterProcesses, app: str, stream: str, count: int) -> set[int]:
    """The ports of the masters serving the partitions of a stream."""
    layout = Cluster()
    return {cluster.master_of(layout.partition(app, stream, n)).port for n in range(count)}


async def test_events_flow_in_order_per_key_over_every_master(
    redis_cluster: RedisClusterProcesses,
) -> None:
    app = make_app(redis_cluster.url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=8)
    assert len(spread(redis_cluster, "shop", "pings", 8)) == 3  # the test spans the cluster
    seen: dict[str, list[int]] = {}
    done = asyncio.Event()
    total = 300

    @app.processor(pings)
    async def collect(events):
        async for ping in events.records():
            seen.setdefault(ping.key, []).append(ping.n)
            if sum(map(len, seen.values())) == total:
                done.set()

    ids = await pings.send(*[Ping(key=f"k{i % 11}", n=i) for i in range(total)])
    assert len(ids) == total and all(ids)
    assert await run_until(Worker(app), done) == 0
    for key, ns in seen.items():
        assert ns == sorted(ns), key
    assert sorted(n for ns in seen.values() for n in ns) == list(range(total))
    report = await status_report(app)
    assert report["key_layout"] == "cluster"
    [proc] = report["processors"]
    assert all(p["pending"] == 0 and p["lag"] == 0 for p in proc["partitions"])
    await app.transport.aclose()


async def test_keys_follow_the_cluster_layout(redis_cluster: RedisClusterProcesses) -> None:
    app = make_app(redis_cluster.url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    await pings.send(Ping(key="a", n=1))
    key = app.transport.partition_key(pings.partitions[0].id)
    assert key.startswith("__strm:{shop.pings.")
    lock = Cluster().partition_lock("shop", "pings", "p", 0)
    assert key_slot(lock.encode()) == key_slot(Cluster().partition("shop", "pings", 0).encode())
    await app.transport.aclose()


async def test_a_cluster_refuses_the_classic_layout(redis_cluster: RedisClusterProcesses) -> None:
    app = make_app(redis_cluster.url, redis_key_layout="classic")
    with pytest.raises(Misconfigured, match="cluster key layout"):
        _ = app.transport


async def test_the_job_queue_says_not_yet(redis_cluster: RedisClusterProcesses) -> None:
    app = make_app(redis_cluster.url)
    with pytest.raises(Misconfigured, match="not yet"):
        app.transport.job_store("shop")
    await app.transport.aclose()
