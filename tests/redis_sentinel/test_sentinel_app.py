"""An app on ``redis+sentinel://``: streams, tables, jobs and the partition logs go to
the master the sentinels name, and follow it through a failover without a restart."""

from __future__ import annotations

import asyncio
import pickle
from collections import Counter
from typing import Any

import pytest

from runnel import App, Record
from runnel.exceptions import AccessDenied, NotConnected, Unavailable
from runnel.store.log import PartitionId
from runnel.store.synclog import LogError
from runnel.testing import run
from runnel_dashboard.snapshot import snapshot
from runnel_redis.transport import RedisTransport
from tests.support.apps import FAST, HANG_GUARD, Running
from tests.support.sentinel import DATA_PASSWORD, SENTINEL_PASSWORD, SentinelGroup


class Order(Record):
    customer: str
    amount: int


def shop(url: str, name: str = "shop", **settings: Any) -> App:
    return App(name=name, redis_url=url, **{**FAST, **settings})


async def test_streams_tables_and_jobs_go_through_the_sentinels(
    sentinels: SentinelGroup, sentinel_url: str
) -> None:
    app = shop(sentinel_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=3)
    counts = app.table("counts", source=orders, default=0)

    @app.processor(orders)
    async def tally(events: Any) -> None:
        async for order in events.records():
            counts[order.customer] += 1

    @app.job
    async def double(n: int) -> int:
        return 2 * n

    sent = [Order(customer=f"c{i % 5}", amount=i) for i in range(200)]
    async with run(app, store=sentinel_url) as t:
        await orders.send(*sent)
        await t.processed()
        result = await double.delay(21)
        assert await result.get(timeout=HANG_GUARD) == 42
    for customer, count in Counter(o.customer for o in sent).items():
        assert await counts.get(customer) == count
    # On the master the sentinels name (and on its replica), nothing anywhere else.
    master = sentinels.master_client()
    assert master.xlen(orders.partitions[0].key) > 0
    sentinels.wait_synced()
    page = await snapshot(app)  # the dashboard reads through the sentinels too
    assert page["url"] == sentinel_url.replace(DATA_PASSWORD, "***").replace(
        SENTINEL_PASSWORD, "***"
    )
    assert [p["name"] for p in page["processors"]] == ["tally"]
    await app.aclose()


async def test_a_transport_shows_no_password(sentinel_url: str) -> None:
    transport = RedisTransport(sentinel_url)
    try:
        shown = repr(transport)
        assert DATA_PASSWORD not in shown and SENTINEL_PASSWORD not in shown
        assert "sentinel_password=***" in shown
        assert await transport.redis.ping()
    finally:
        await transport.aclose()


async def test_wrong_sentinel_credentials_are_access_denied(sentinels: SentinelGroup) -> None:
    url = sentinels.url().replace(SENTINEL_PASSWORD, "wrong")
    transport = RedisTransport(url)
    try:
        with pytest.raises(AccessDenied) as caught:
            await transport.lengths([PartitionId("shop", "s", 0)])
        assert "sentinel" in str(caught.value) and "wrong" not in str(caught.value)
    finally:
        await transport.aclose()


async def test_no_sentinel_answering_is_not_connected(sentinels: SentinelGroup) -> None:
    url = sentinels.url().replace(f":{sentinels.sentinels[0].port}", ":1")
    url = url.replace(f",127.0.0.1:{sentinels.sentinels[1].port}", "")
    url = url.replace(f",127.0.0.1:{sentinels.sentinels[2].port}", "")
    transport = RedisTransport(url)
    try:
        with pytest.raises(NotConnected):
            await transport.lengths([PartitionId("shop", "s", 0)])
    finally:
        await transport.aclose()


async def test_the_partition_logs_follow_the_master(sentinels: SentinelGroup) -> None:
    """runnel-spark's executors get the log pickled: it reconnects to whichever master
    the sentinels name, the failover itself a LogError to retry."""
    app = shop(sentinels.url())
    log = pickle.loads(pickle.dumps(app.store.sync_log()))
    partition = PartitionId("shop", "orders", 0)
    log.append([(partition, {b"v": b"1"})])
    await asyncio.to_thread(sentinels.failover)
    for _ in range(50):  # the first call after the failover may find a closed connection
        try:
            log.append([(partition, {b"v": b"2"})])
            break
        except LogError:
            await asyncio.sleep(0.1)
    [extent] = log.extents([partition])
    assert extent.length == 2
    log.close()
    await app.aclose()


async def test_a_demoted_master_is_unavailable_not_a_bug(sentinels: SentinelGroup) -> None:
    """A plain client still pointed at the old master after a failover: its writes are
    refused with READONLY, which is Unavailable (retried), not a failure to surface."""
    old = sentinels.master
    await asyncio.to_thread(sentinels.failover)
    transport = RedisTransport(f"redis://:{DATA_PASSWORD}@127.0.0.1:{old.port}/0")
    try:
        with pytest.raises(Unavailable) as caught:
            await transport.append([(PartitionId("shop", "s", 0), {b"v": b"1"})])
        assert "read only replica" in str(caught.value)
    finally:
        await transport.aclose()


async def test_a_worker_and_a_producer_follow_a_failover(sentinels: SentinelGroup) -> None:
    """SENTINEL FAILOVER while a worker in this process processes and a producer sends:
    every send that returned is processed (at least once), with no restart."""
    app = shop(sentinels.url())
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=3)
    seen: list[int] = []

    @app.processor(orders)
    async def collect(events: Any) -> None:
        async for order in events.records():
            seen.append(order.amount)

    sent: list[int] = []
    stop = asyncio.Event()

    async def produce() -> None:
        n = 0
        while not stop.is_set():
            try:
                await orders.send(Order(customer=f"c{n % 7}", amount=n))
                sent.append(n)
            except Unavailable:  # the failover under way: not known to be sent
                await asyncio.sleep(0.05)
            n += 1
            await asyncio.sleep(0.005)

    async with Running(app) as running:
        producer = asyncio.create_task(produce())
        await running.until(lambda: len(seen) >= 50, "processing started")
        await asyncio.to_thread(sentinels.failover)
        before = len(sent)
        await running.until(lambda: len(sent) >= before + 100, "sends after the failover")
        stop.set()
        await producer
        await running.until(lambda: set(sent) <= set(seen), "every sent event processed")
        assert await running.stop() == 0
    await app.aclose()
