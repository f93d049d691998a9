"""What redis-py's asyncio RedisCluster does with the steps Runnel needs (docs/cluster.md).

These pin the client and server behaviour the cluster transport will rely on, so that an
upgrade that changes it shows here first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from runnel_redis import scripts
from runnel_redis.layout import Cluster
from tests.support.redis_cluster import RedisClusterProcesses

layout = Cluster()


@pytest.fixture
async def client(redis_cluster: RedisClusterProcesses) -> AsyncIterator[RedisCluster]:
    async with RedisCluster.from_url(redis_cluster.redis_url) as client:
        yield client


def needs_script_flags(cluster: RedisClusterProcesses) -> None:
    """Script flags (``#!lua flags=...``) came with Redis 7."""
    with cluster.masters()[0].client() as plain:
        version = str(plain.info("server")["redis_version"])
    if int(version.split(".")[0]) < 7:
        pytest.skip(f"Redis {version} knows no script flags")


def on_other_nodes(cluster: RedisClusterProcesses, count: int) -> list[str]:
    """Keys whose slots are served by ``count`` different masters."""
    found: dict[int, str] = {}
    for i in range(10_000):
        key = f"{{k{i}}}"
        found.setdefault(cluster.master_of(key).port, key)
        if len(found) == count:
            return list(found.values())
    raise AssertionError("not enough masters")


async def test_a_pipeline_spans_nodes_and_keeps_the_callers_order(
    redis_cluster: RedisClusterProcesses, client: RedisCluster
) -> None:
    names = on_other_nodes(redis_cluster, 3)
    pipe = client.pipeline()
    for i, name in enumerate(names):
        pipe.set(name, i)
    for name in names:
        pipe.get(name)
    assert await pipe.execute() == [True] * 3 + [b"0", b"1", b"2"]


async def test_a_transaction_must_stay_in_one_slot(client: RedisCluster) -> None:
    pipe = client.pipeline(transaction=True)
    pipe.set("{t}.a", 1)
    pipe.incr("{t}.b")
    assert await pipe.execute() == [True, 1]

    pipe = client.pipeline(transaction=True)
    pipe.set("{t}.a", 1)
    pipe.set("{u}.a", 1)
    with pytest.raises(redis.exceptions.CrossSlotTransactionError):
        await pipe.execute()


async def test_a_script_must_name_keys_of_one_slot(
    redis_cluster: RedisClusterProcesses, client: RedisCluster
) -> None:
    with pytest.raises(redis.exceptions.RedisClusterException, match="same key slot"):
        await client.eval("return 1", 2, "{e}.a", "{f}.a")
    # A script object loads itself on every node that does not know it yet.
    counter = client.register_script("return redis.call('INCR', KEYS[1])")
    assert [await counter(keys=[key]) for key in on_other_nodes(redis_cluster, 3)] == [1, 1, 1]


async def test_a_flagged_script_may_touch_undeclared_keys_of_its_slot_only(
    redis_cluster: RedisClusterProcesses, client: RedisCluster
) -> None:
    needs_script_flags(redis_cluster)
    touch = "#!lua flags=allow-oom\nreturn redis.call('SET', ARGV[1], 1)"
    # What the job scripts do: build a key of the queue from its prefix inside Lua.
    prefix = layout.jobs_prefix("shop")
    assert await client.eval(touch, 1, layout.job_queue("shop"), prefix + "job.1") == b"OK"

    master = redis_cluster.master_of("{w}")
    other = next(
        f"{{w{i}}}"
        for i in range(10_000)
        if redis_cluster.master_of(f"{{w{i}}}").port == master.port
        and key_slot(f"{{w{i}}}".encode()) != key_slot(b"{w}")
    )
    with pytest.raises(redis.ResponseError, match="same slot"):
        await client.eval(touch, 1, "{w}", other)


async def test_a_blocking_group_read_must_stay_in_one_slot(client: RedisCluster) -> None:
    for name in ("{p}.0", "{p}.1", "{q}.0"):
        await client.xgroup_create(name, "g", id="0", mkstream=True)
        await client.xadd(name, {"a": 1})
    read = await client.xreadgroup("g", "c", {"{p}.0": ">", "{p}.1": ">"}, count=10, block=10)
    assert [stream for stream, _ in read] == [b"{p}.0", b"{p}.1"]
    with pytest.raises(redis.exceptions.RedisClusterException, match="same key slot"):
        await client.xreadgroup("g", "c", {"{p}.0": ">", "{q}.0": ">"}, count=10, block=10)


async def test_the_fenced_read_runs_on_the_keys_of_one_partition(client: RedisCluster) -> None:
    stream = layout.partition("shop", "orders", 3)
    lock = layout.partition_lock("shop", "orders", "totals", 3)
    await client.xgroup_create(stream, "totals", id="0", mkstream=True)
    await client.xadd(stream, {"k": "v"})
    await client.set(lock, "me")
    held, reply = await client.eval(
        scripts.plain(scripts.FENCED_READ), 2, lock, stream, "me", "totals", "runnel", 10, ">"
    )
    assert held == [1]
    assert reply[0][0] == stream.encode() and len(reply[0][1]) == 1


async def test_wait_goes_to_the_keys_master_and_primaries_sum_up(
    redis_cluster_replicas: RedisClusterProcesses,
) -> None:
    client = RedisCluster.from_url(redis_cluster_replicas.redis_url)
    try:
        await client.set("{w}.a", 1)
        node = client.get_node_from_key("{w}.a")
        assert await client.execute_command("WAIT", 1, 0, target_nodes=node) == 1
        summed = await client.execute_command("WAIT", 1, 0, target_nodes=RedisCluster.PRIMARIES)
        assert summed == 3
    finally:
        await client.aclose()


async def test_during_a_migration_single_keys_follow_ask_and_multi_key_steps_fail(
    redis_cluster: RedisClusterProcesses, client: RedisCluster
) -> None:
    await client.set("{m}.moved", "m")
    await client.set("{m}.stays", "s")
    slot = key_slot(b"{m}.moved")
    target = next(
        m for m in redis_cluster.masters() if m.port != redis_cluster.master_of_slot(slot).port
    )
    source = redis_cluster.begin_migration(slot, target)
    source.command("MIGRATE", "127.0.0.1", target.port, "{m}.moved", 0, 5000)

    assert await client.get("{m}.moved") == b"m"
    assert await client.eval("return redis.call('GET', KEYS[1])", 1, "{m}.moved") == b"m"
    # ASK is followed once; the slot map still names the source.
    node = client.get_node_from_key("{m}.moved")
    assert node is not None and node.port == source.port
    # A transaction does not follow the redirection.
    pipe = client.pipeline(transaction=True)
    pipe.get("{m}.moved")
    pipe.get("{m}.stays")
    with pytest.raises(redis.exceptions.RedisError):
        await pipe.execute()
    # Keys of one slot split between two nodes: TRYAGAIN until the client gives up.
    with pytest.raises(redis.exceptions.ClusterError, match="TTL exhausted"):
        await client.eval("return 1", 2, "{m}.moved", "{m}.stays")

    redis_cluster.move_keys(slot, source, target)
    redis_cluster.finish_migration(slot, target)
    assert await client.eval("return 1", 2, "{m}.moved", "{m}.stays") == 1
