"""A send on a Redis Cluster whose reply is lost: the connection to one master drops with
the reply of its part of the send in flight. The cluster client reports that part as
failed (its pipeline does not send a command again once it was written); the send, in
doubt, is sent again under its call's identity: every master recognises what it took,
nothing is appended twice and the send returns each record's first id. Without
identities the send raises PartlySent, in doubt, and a caller sending the rest again
stores that part twice.

Every master is reached through a proxy of its own (redis-py's ``address_remap`` maps
the addresses the cluster announces to them), so one master's replies can be cut.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from redis.cluster import RedisCluster as SyncCluster

from runnel import App, Record, Stream
from runnel.admin.status import status_report
from runnel.exceptions import PartlySent
from runnel.store import PartitionId, SequencedIdentity
from runnel_redis.cluster import RedisClusterTransport
from runnel_redis.cluster_log import ClusterLog
from runnel_redis.layout import Cluster
from runnel_redis.urls import client_url
from tests.support.apps import FAST
from tests.support.proxy import Proxy
from tests.support.redis_cluster import HOST, RedisClusterProcesses


class Ping(Record):
    key: str
    n: int


PARTITIONS = 6


@pytest.fixture
def proxies(redis_cluster: RedisClusterProcesses) -> Iterator[dict[int, Proxy]]:
    """A proxy in front of each master, by the master's port."""
    found = {node.port: Proxy(HOST, node.port) for node in redis_cluster.masters()}
    yield found
    for proxy in found.values():
        proxy.close()


def app_through(proxies: dict[int, Proxy], **settings: Any) -> App:
    """An app whose store reaches every master through its proxy."""
    remap = {(HOST, port): (HOST, proxy.port) for port, proxy in proxies.items()}
    url = f"redis+cluster://{HOST}:{next(iter(proxies.values())).port}"
    app = App(name=f"lost{uuid.uuid4().hex[:8]}", redis_url=url, **{**FAST, **settings})

    def store() -> RedisClusterTransport:
        return RedisClusterTransport(
            url, layout=Cluster(), address_remap=lambda at: remap.get(at, at)
        )

    app._new_store = store  # type: ignore[method-assign]
    return app


def cut(app: App, cluster: RedisClusterProcesses, proxies: dict[int, Proxy]) -> Proxy:
    """Arm the proxy of partition 0's master to drop the reply of the next append there."""
    key = app.streams["pings"].partitions[0].key
    proxy = proxies[cluster.master_of(key).port]
    proxy.arm(key.encode())
    return proxy


async def stored(app: App, number: int) -> list[tuple[bytes, Ping]]:
    pings = app.streams["pings"]
    admin = app.store.admin()
    assert admin is not None
    entries = await admin.scan(pings.partitions[number].id, None, 10_000)
    return [(xid, r) for xid, f in entries if (r := pings.decode(f)).n >= 0]


async def declare(app: App) -> Stream:
    """The stream, warmed up: every master has run the append scripts."""
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=PARTITIONS)
    await pings.send(*[Ping(key=f"warm{i}", n=-1) for i in range(40)])
    return pings


RECORDS = [Ping(key=f"k{i}", n=i) for i in range(120)]


async def test_a_send_whose_reply_was_lost_appends_nothing_twice(
    redis_cluster: RedisClusterProcesses, proxies: dict[int, Proxy]
) -> None:
    app = app_through(proxies)
    pings = await declare(app)
    proxy = cut(app, redis_cluster, proxies)
    ids = await pings.send(*RECORDS)
    assert proxy.dropped.is_set()
    for n in range(PARTITIONS):
        mine = [
            (xid, r) for xid, r in zip(ids, RECORDS, strict=True) if pings.partition_number(r) == n
        ]
        assert await stored(app, n) == mine  # each record once, under the returned id
    # Sent again whole: every master recognised its part, written or with its reply lost.
    assert ids.duplicates == len(RECORDS)
    report = await status_report(app)
    assert [s["duplicates_dropped"] for s in report["streams"]] == [len(RECORDS)]
    await app.aclose()


async def test_without_identities_a_lost_reply_is_the_callers_doubt(
    redis_cluster: RedisClusterProcesses, proxies: dict[int, Proxy]
) -> None:
    app = app_through(proxies, idempotent_sends=False)
    pings = await declare(app)
    cut(app, redis_cluster, proxies)
    with pytest.raises(PartlySent) as doubt:
        await pings.send(*RECORDS)
    assert doubt.value.in_doubt and "may or may not be" in str(doubt.value)
    unsure = [r for r, xid in zip(RECORDS, doubt.value.ids, strict=True) if xid is None]
    await pings.send(*unsure)  # what a caller can do: send again those not known to be in
    part = [r for r in RECORDS if pings.partition_number(r) == 0]
    assert [r for _, r in await stored(app, 0)] == part + part
    await app.aclose()


@pytest.mark.parametrize("identified", [True, False])
async def test_the_sync_logs_client_sends_a_lost_append_again(
    redis_cluster: RedisClusterProcesses, proxies: dict[int, Proxy], identified: bool
) -> None:
    """What Spark writes through (runnel_redis.cluster_log): redis-py's synchronous
    cluster pipeline does send a command again when its reply was lost. Under an identity
    the master recognises it; without one it appends the part twice."""
    remap = {(HOST, port): (HOST, proxy.port) for port, proxy in proxies.items()}
    url = f"redis+cluster://{HOST}:{next(iter(proxies.values())).port}"
    log = ClusterLog(url)
    log._cluster = SyncCluster.from_url(
        client_url(url), decode_responses=False, address_remap=lambda at: remap.get(at, at)
    )
    app = f"spark{uuid.uuid4().hex[:8]}"
    partition = PartitionId(app, "rows", 0)
    key = Cluster().partition(*partition)
    rows = [(partition, {b"n": str(n).encode()}) for n in range(10)]
    log.append(rows[:1])  # connected, the script loaded
    proxy = proxies[redis_cluster.master_of(key).port]
    proxy.arm(key.encode())
    identity = SequencedIdentity("write:1", list(range(1, 11))) if identified else None
    got = log.append(rows, identity=identity)
    assert proxy.dropped.is_set()
    stored = [f[b"n"] for _, f in redis_cluster.master_of(key).client().xrange(key)]
    numbers = [str(n).encode() for n in range(10)]
    assert stored == ([b"0", *numbers] if identified else [b"0", *numbers, *numbers])
    assert got.duplicates == (10 if identified else 0)
    log.close()
