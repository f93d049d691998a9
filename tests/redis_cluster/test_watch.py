"""How a cluster transport waits for new entries and runs its scripts, on a real cluster.

Waiting: one blocking read per watched partition, shared by callers watching the same
partition from the same id, left running when a caller gives up (so the next wait needs
no new connection) and ended by ``aclose``. Scripts: sent by digest, and by text only to
a node that answers ``NOSCRIPT``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from runnel.store.log import PartitionId
from runnel_redis import cluster as cluster_module
from runnel_redis.cluster import RedisClusterTransport
from tests.support.apps import eventually
from tests.support.redis_cluster import RedisClusterProcesses

LONG = 60_000
"""A block long enough never to end by itself in a test (the test ends the wait)."""


def blocked_reads(cluster: RedisClusterProcesses) -> int:
    """Connections blocked (in XREAD: nothing else here blocks), over all masters."""
    count = 0
    for node in cluster.masters():
        with node.client() as client:
            count += sum(1 for c in client.client_list() if "b" in c["flags"])
    return count


def partitions(n: int) -> list[PartitionId]:
    return [PartitionId("shop", "orders", i) for i in range(n)]


@pytest.fixture
async def transport(redis_cluster: RedisClusterProcesses) -> AsyncIterator[RedisClusterTransport]:
    transport = RedisClusterTransport(redis_cluster.url)
    yield transport
    await transport.aclose()


async def tips(transport: RedisClusterTransport, ps: list[PartitionId]) -> dict:
    """Each partition with an entry, and the id of its last one."""
    ids = await transport.append([(p, {b"k": b"v"}) for p in ps])
    return dict(zip(ps, ids, strict=True))


async def test_a_wait_wakes_when_any_partition_gets_an_entry(
    redis_cluster: RedisClusterProcesses,
    transport: RedisClusterTransport,
) -> None:
    ps = partitions(6)
    after = await tips(transport, ps)
    waiting = asyncio.create_task(transport.wait_for_new(after, LONG))
    await eventually(lambda: blocked_reads(redis_cluster) == 6)
    assert not waiting.done()
    await transport.append([(ps[4], {b"k": b"new"})])
    assert await waiting is True
    await transport.aclose()
    assert blocked_reads(redis_cluster) == 0


async def test_a_wait_that_times_out_leaves_its_reads_for_the_next(
    redis_cluster: RedisClusterProcesses,
    transport: RedisClusterTransport,
) -> None:
    ps = partitions(4)
    after = await tips(transport, ps)
    # A short wait gives up; its reads (started with a longer block by a first
    # caller) stay, and a second and third caller share them.
    first = asyncio.create_task(transport.wait_for_new(after, LONG))
    await eventually(lambda: blocked_reads(redis_cluster) == 4)
    assert await transport.wait_for_new(after, 50) is False
    second = asyncio.create_task(transport.wait_for_new(after, LONG))
    await asyncio.sleep(0.1)
    assert blocked_reads(redis_cluster) == 4
    await transport.append([(ps[0], {b"k": b"new"})])
    assert await first is True
    assert await second is True


async def test_a_wait_sees_entries_already_there(transport: RedisClusterTransport) -> None:
    ps = partitions(3)
    after = await tips(transport, ps)
    await transport.append([(ps[2], {b"k": b"new"})])
    assert await transport.wait_for_new(after, LONG) is True
    assert await transport.wait_for_new({ps[0]: None}, LONG) is True  # from the start
    assert await transport.wait_for_new({PartitionId("shop", "none", 0): None}, 50) is False
    assert await transport.wait_for_new({}, 50) is False


async def test_over_max_blocking_partitions_a_wait_looks_instead(
    redis_cluster: RedisClusterProcesses,
    transport: RedisClusterTransport,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cluster_module, "MAX_BLOCKING", 2)
    ps = partitions(5)
    after = await tips(transport, ps)
    assert await transport.wait_for_new(after, 50) is False
    waiting = asyncio.create_task(transport.wait_for_new(after, LONG))
    await asyncio.sleep(0.1)
    assert blocked_reads(redis_cluster) == 0  # looking, not blocking
    await transport.append([(ps[3], {b"k": b"new"})])
    assert await waiting is True


async def test_scripts_a_node_forgot_are_sent_again_by_text(
    redis_cluster: RedisClusterProcesses,
    transport: RedisClusterTransport,
) -> None:
    ps = partitions(6)
    await tips(transport, ps)  # every master knows the append script now
    for node in redis_cluster.masters():
        node.command("SCRIPT", "FLUSH")
    ids = await transport.append([(p, {b"k": b"again"}) for p in ps] * 2)
    assert len(ids) == 12 and all(ids)
    for p in ps:
        assert await transport.redis.xlen(transport.partition_key(p)) == 3
    assert evalsha_calls(redis_cluster) > 0  # by digest, once known


async def test_scripts_sent_again_then_wait_for_replicas(
    redis_cluster_replicas: RedisClusterProcesses,
) -> None:
    transport = RedisClusterTransport(redis_cluster_replicas.url, wait_replicas=1, wait_timeout=5)
    try:
        ps = partitions(6)
        await tips(transport, ps)
        for node in redis_cluster_replicas.masters():
            node.command("SCRIPT", "FLUSH")
        ids = await transport.append([(p, {b"k": b"again"}) for p in ps])
        assert len(ids) == 6 and all(ids)
        for p in ps:
            assert await transport.redis.xlen(transport.partition_key(p)) == 2
    finally:
        await transport.aclose()


def evalsha_calls(cluster: RedisClusterProcesses) -> int:
    total = 0
    for node in cluster.masters():
        with node.client() as client:
            total += int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
    return total
