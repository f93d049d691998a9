"""The Redis Cluster fixture itself: a real cluster that fails over and moves slots."""

from __future__ import annotations

import redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from tests.support.redis_cluster import SLOTS, RedisClusterProcesses


def test_every_slot_is_served_by_one_of_three_masters(redis_cluster: RedisClusterProcesses) -> None:
    masters = redis_cluster.masters()
    assert len(masters) == 3
    served: list[int] = []
    for line in masters[0].view():
        if line.master:
            served.extend(line.slots)
    assert sorted(served) == list(range(SLOTS))
    assert redis_cluster.url.startswith("redis+cluster://127.0.0.1:")
    assert ":6379" not in redis_cluster.url


def test_keys_of_one_hash_tag_land_on_one_node(redis_cluster: RedisClusterProcesses) -> None:
    client = redis.RedisCluster.from_url(redis_cluster.redis_url)
    try:
        names = [f"{{orders.3}}.{kind}" for kind in ("stream", "lock", "other")]
        for name in names:
            client.set(name, "x")
        holders = [m for m in redis_cluster.masters() if m.command("DBSIZE")]
        assert [m.port for m in holders] == [redis_cluster.master_of(names[0]).port]
        assert holders[0].command("DBSIZE") == len(names)
        node = client.get_node_from_key(names[0])
        assert node is not None and node.port == holders[0].port
    finally:
        client.close()


async def test_a_replica_takes_over_a_killed_master(
    redis_cluster_replicas: RedisClusterProcesses,
) -> None:
    cluster = redis_cluster_replicas
    client = RedisCluster.from_url(cluster.redis_url)
    try:
        await client.set("{k}.a", "before")
        master = cluster.master_of("{k}.a")
        replica = cluster.replicas_of(master)[0]
        # Make sure the replica has the write before the master dies.
        await client.execute_command("WAIT", 1, 0, target_nodes=client.get_node_from_key("{k}.a"))

        killed = cluster.kill_master_of("{k}.a")

        assert killed.port == master.port and not killed.alive
        assert cluster.master_of("{k}.a").port == replica.port
        assert await client.get("{k}.a") == b"before"
        await client.set("{k}.a", "after")
        assert await client.get("{k}.a") == b"after"
        assert replica.command("GET", "{k}.a") == b"after"
    finally:
        await client.aclose()
    cluster.revive(killed)
    assert killed.alive and cluster.replicas_of(replica)[0].port == killed.port


async def test_moving_a_slot_moves_its_keys_and_the_client_follows(
    redis_cluster: RedisClusterProcesses,
) -> None:
    cluster = redis_cluster
    client = RedisCluster.from_url(cluster.redis_url)
    try:
        await client.set("{m}.a", "1")
        source = cluster.master_of("{m}.a")
        target = next(m for m in cluster.masters() if m.port != source.port)

        cluster.migrate_slot_of("{m}.a", target)

        assert cluster.master_of("{m}.a").port == target.port
        slot = key_slot(b"{m}.a")
        assert target.command("GET", "{m}.a") == b"1"
        assert source.command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
        # The client still routes the slot to the source: it gets MOVED and follows.
        assert await client.get("{m}.a") == b"1"
        node = client.get_node_from_key("{m}.a")
        assert node is not None and node.port == target.port
    finally:
        await client.aclose()


async def test_a_half_moved_slot_answers_ask_and_the_client_follows(
    redis_cluster: RedisClusterProcesses,
) -> None:
    cluster = redis_cluster
    client = RedisCluster.from_url(cluster.redis_url)
    try:
        await client.set("{h}.moved", "m")
        await client.set("{h}.stays", "s")
        slot = key_slot(b"{h}.moved")
        target = next(m for m in cluster.masters() if m.port != cluster.master_of_slot(slot).port)
        source = cluster.begin_migration(slot, target)
        source.command("MIGRATE", "127.0.0.1", target.port, "{h}.moved", 0, 5000)

        # The slot is still the source's; for the moved key it answers ASK.
        assert await client.get("{h}.moved") == b"m"
        assert await client.get("{h}.stays") == b"s"

        cluster.move_keys(slot, source, target)
        cluster.finish_migration(slot, target)
        assert await client.get("{h}.stays") == b"s"
    finally:
        await client.aclose()


def test_resharding_with_redis_cli_keeps_every_key(redis_cluster: RedisClusterProcesses) -> None:
    cluster = redis_cluster
    client = redis.RedisCluster.from_url(cluster.redis_url)
    try:
        for i in range(200):
            client.set(f"r{i}", i)
        source, target = cluster.masters()[:2]

        cluster.reshard(100, source, target)

        assert [client.get(f"r{i}") for i in range(200)] == [str(i).encode() for i in range(200)]
    finally:
        client.close()
