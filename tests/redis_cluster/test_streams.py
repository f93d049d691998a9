"""Streams on a real Redis Cluster (``redis+cluster://``): send, process, acknowledge,
status, per-key order, workers sharing partitions, leader election, wait_replicas."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis.crc import key_slot

from runnel import App, Record, Stream
from runnel.admin.status import status_report
from runnel.exceptions import EntryIdError, Misconfigured, NotReplicated, PartlySent, Unavailable
from runnel.jobs import JobStatus
from runnel.runtime.worker import Worker
from runnel.store.log import PartitionId
from runnel_redis.layout import Cluster
from tests.support.apps import FAST, HANG_GUARD, Running, eventually, keys_by_partition
from tests.support.redis_cluster import RedisClusterProcesses


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


@pytest.mark.parametrize("protocol", [2, 3])
async def test_events_flow_in_order_per_key_over_every_master(
    redis_cluster: RedisClusterProcesses, protocol: int
) -> None:
    app = make_app(f"{redis_cluster.url}?protocol={protocol}")
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
    await app.store.aclose()


async def test_keys_follow_the_cluster_layout(redis_cluster: RedisClusterProcesses) -> None:
    app = make_app(redis_cluster.url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    await pings.send(Ping(key="a", n=1))
    key = app.store.log.partition_key(pings.partitions[0].id)
    assert key.startswith("__strm:{shop.pings.")
    lock = Cluster().partition_lock("shop", "pings", "p", 0)
    assert key_slot(lock.encode()) == key_slot(Cluster().partition("shop", "pings", 0).encode())
    await app.store.aclose()


async def test_a_cluster_refuses_the_classic_layout(redis_cluster: RedisClusterProcesses) -> None:
    app = make_app(redis_cluster.url, redis_key_layout="classic")
    with pytest.raises(Misconfigured, match="cluster key layout"):
        _ = app.transport


async def test_explicit_entry_ids_on_a_cluster(redis_cluster: RedisClusterProcesses) -> None:
    app = make_app(redis_cluster.url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=4)
    records = [Ping(key=f"k{i}", n=i) for i in range(6)]
    ids = await pings.send(*records, stream_ids=[f"{100 + i}-1" for i in range(6)])
    assert ids == [f"{100 + i}-1".encode() for i in range(6)]
    with pytest.raises(EntryIdError):
        await pings.send(*records[:1], stream_ids=["1-1"])
    await app.store.aclose()


async def test_a_failed_partition_names_the_records_that_are_in_redis(
    redis_cluster: RedisClusterProcesses,
) -> None:
    """Each partition's part of a send is whole or absent; when one fails the error says
    which records were written (their entry ids) and which were not."""
    app = make_app(redis_cluster.url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=4)
    keys = keys_by_partition(pings, lambda k: Ping(key=k, n=0), 4)
    broken = pings.partitions[pings.partition_number(Ping(key=keys[2], n=0))]
    redis_cluster.master_of(broken.key).client().set(broken.key, "not a stream")
    records = [Ping(key=keys[i % 4], n=i) for i in range(8)]
    with pytest.raises(PartlySent, match="6 of 8 records are in Redis") as caught:
        await pings.send(*records)
    assert caught.value.sent == [0, 1, 3, 4, 5, 7]
    scanned = {
        xid
        for p in pings.partitions
        if p is not broken
        for xid, _ in await app.store.admin().scan(p.id, None, 100)
    }
    assert scanned == {xid for xid in caught.value.ids if xid is not None}
    await app.store.aclose()


# Several workers, one leader.

COUNT = 8


def declare(url: str, tag: str, seen: list[tuple[str, int, str, int]]) -> tuple[App, Stream]:
    app = make_app(url, "multi", default_lock_expiry=2)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=COUNT)

    @app.processor(pings, name="proc")
    async def proc(events):
        async for event in events:
            seen.append((tag, event.partition.number, event.record.key, event.record.n))

    return app, pings


async def owners(app: App) -> dict[int, str | None]:
    coord = app.store.coordination("multi", "pings", "proc")
    found = await coord.lock_owners([PartitionId("multi", "pings", n) for n in range(COUNT)])
    return {p.number: owner for p, owner in found.items()}


async def split(app: App, *runnings: Running) -> dict[str, set[int]]:
    """Wait until the runners own an even split and hold its locks; executor -> owned."""
    async with asyncio.timeout(HANG_GUARD):
        while True:
            owned = {r.worker.executors[0].id: r.worker.executors[0].runner.owned for r in runnings}
            locks = await owners(app)
            even = all(len(ps) == COUNT // len(runnings) for ps in owned.values())
            if even and all(locks[p] == e for e, ps in owned.items() for p in ps):
                return {e: set(ps) for e, ps in owned.items()}
            await asyncio.sleep(0.02)


async def test_two_workers_split_the_partitions_and_one_takes_over(
    redis_cluster: RedisClusterProcesses,
) -> None:
    seen: list[tuple[str, int, str, int]] = []
    app_a, pings = declare(redis_cluster.url, "a", seen)
    app_b, _ = declare(redis_cluster.url, "b", seen)
    routing = keys_by_partition(pings, lambda k: Ping(key=k, n=0), COUNT)
    async with Running(app_a) as a, Running(app_b) as b:
        owned = await split(app_a, a, b)
        total = 200
        await pings.send(*[Ping(key=routing[n % COUNT], n=n) for n in range(total)])
        await eventually(lambda: len(seen) >= total, "every event was processed")
        assert sorted(n for *_, n in seen) == list(range(total)), "each event once"
        ids = {"a": a.worker.executors[0].id, "b": b.worker.executors[0].id}
        for tag, partition, _, _ in seen:
            assert partition in owned[ids[tag]], "processed by the partition's owner"
        by_key: dict[str, list[int]] = {}
        for _, _, key, n in seen:
            by_key.setdefault(key, []).append(n)
        assert all(ns == sorted(ns) for ns in by_key.values())

        assert await b.stop() == 0
        assert await split(app_a, a) == {ids["a"]: set(range(COUNT))}
        before = len(seen)
        await pings.send(*[Ping(key=routing[n % COUNT], n=n) for n in range(total, total + 40)])
        await eventually(lambda: len(seen) >= before + 40, "a processed the new events")
        assert {tag for tag, *_ in seen[before:]} == {"a"}
        assert await a.stop() == 0
    assert set((await owners(app_a)).values()) == {None}


async def test_one_leader_at_a_time_and_the_other_takes_over(
    redis_cluster: RedisClusterProcesses,
) -> None:
    runs: list[str] = []
    workers: dict[str, Worker] = {}

    def declare_leader(tag: str) -> App:
        app = make_app(redis_cluster.url, "lead", leadership_poll_interval=100)

        @app.timer(interval=0.05, on_leader=True)
        async def tick():
            runs.append(workers[tag].id)

        return app

    async with Running(declare_leader("a")) as a, Running(declare_leader("b")) as b:
        workers.update(a=a.worker, b=b.worker)
        await eventually(lambda: len(runs) >= 5, "the leader's timer ran")
        leader, follower = (a, b) if runs[0] == a.worker.id else (b, a)
        assert set(runs) == {leader.worker.id}
        assert await a.worker.app.store.leadership("lead").leader() == leader.worker.id
        assert await leader.stop() == 0
        before = len(runs)
        await follower.until(lambda: runs[before:].count(follower.worker.id) >= 3, "took over")
        assert set(runs[before:]) == {follower.worker.id}
        assert await follower.stop() == 0


# Waiting for replicas.


async def test_wait_replicas_returns_once_a_replica_holds_the_send(
    redis_cluster_replicas: RedisClusterProcesses,
) -> None:
    cluster = redis_cluster_replicas
    app = make_app(cluster.url, wait_replicas=1, wait_timeout=5)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=6)
    ids = await pings.send(*[Ping(key=f"k{i}", n=i) for i in range(30)])
    assert len(ids) == 30
    for p in pings.partitions:
        master = cluster.master_of(p.key)
        [replica] = cluster.replicas_of(master)
        with master.client() as m, replica.client() as r:
            r.execute_command("READONLY")  # a replica answers reads of its slots
            assert r.xlen(p.key) == m.xlen(p.key)
    await app.store.aclose()


async def test_wait_replicas_says_clearly_when_too_few_replicas_acknowledged(
    redis_cluster_replicas: RedisClusterProcesses,
) -> None:
    app = make_app(redis_cluster_replicas.url, wait_replicas=2, wait_timeout=0.1)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    with pytest.raises(NotReplicated, match="only 1 of the 2 replicas") as caught:
        await pings.send(Ping(key="a", n=1), Ping(key="b", n=2))
    assert (caught.value.wanted, caught.value.acknowledged) == (2, 1)
    assert sum((await app.store.admin().lengths([p.id for p in pings.partitions])).values()) == 2
    await app.store.aclose()


@pytest.mark.parametrize("explicit", [False, True])
async def test_wait_replicas_on_a_single_redis(redis_url: str, explicit: bool) -> None:
    """A single Redis without replicas: the send is in Redis, and the error says so."""
    app = make_app(redis_url, name=f"w{uuid.uuid4().hex[:8]}", wait_replicas=1, wait_timeout=0.05)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    ids = ["5-1"] if explicit else None
    with pytest.raises(NotReplicated, match="only 0 of the 1 replicas"):
        await pings.send(Ping(key="a", n=1), stream_ids=ids)
    assert sum((await app.store.admin().lengths([p.id for p in pings.partitions])).values()) == 1
    await app.store.aclose()


async def test_wait_replicas_on_job_enqueue(redis_cluster_replicas: RedisClusterProcesses) -> None:
    for wanted, replicated, timeout in ((1, True, 10), (2, False, 0.2)):
        app = make_app(redis_cluster_replicas.url, wait_replicas=wanted, wait_timeout=timeout)

        @app.job
        async def noop() -> None:
            pass

        if replicated:
            assert (await noop.delay(job_id="a")).enqueued
        else:
            with pytest.raises(NotReplicated, match="only 1 of the 2 replicas"):
                await noop.delay(job_id="b")
            assert await noop.result("b").status() is not JobStatus.UNKNOWN, "it is stored"
        await app.aclose()


async def test_wait_replicas_on_job_enqueue_on_a_single_redis(redis_url: str) -> None:
    app = make_app(redis_url, name=f"w{uuid.uuid4().hex[:8]}", wait_replicas=1, wait_timeout=0.05)

    @app.job
    async def noop() -> None:
        pass

    with pytest.raises(NotReplicated, match="only 0 of the 1 replicas"):
        await noop.delay(job_id="b")
    assert await noop.result("b").status() is not JobStatus.UNKNOWN, "it is stored"
    await app.aclose()


async def test_a_send_goes_on_while_its_partitions_slot_is_half_moved(
    redis_cluster: RedisClusterProcesses,
) -> None:
    """A slot half moved holds a partition's keys on two masters: a script over several of
    them is refused (TRYAGAIN) until the move is done, the stream alone is followed (ASK).
    A send's part there goes in as a plain append on its first try (it is not protected
    by its identity then); a send with keys, which cannot do without, fails until the
    move is done, then goes in once."""
    cluster = redis_cluster
    app = make_app(cluster.url, name=f"hm{uuid.uuid4().hex[:6]}", send_retries=0)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    [k0] = keys_by_partition(pings, lambda k: Ping(key=k, n=0), 1)
    key = pings.partitions[0].key
    await pings.send(Ping(key=k0, n=0), keys=["first"])  # the stream and its state exist
    slot = key_slot(key.encode())
    source = cluster.master_of(key)
    target = next(m for m in cluster.masters() if m.port != source.port)
    cluster.begin_migration(slot, target)
    cluster.move_keys(slot, source, target, limit=1)
    [xid] = await pings.send(Ping(key=k0, n=1))
    with pytest.raises(Unavailable):
        await pings.send(Ping(key=k0, n=2), keys=["second"])
    cluster.move_keys(slot, source, target)
    cluster.finish_migration(slot, target)
    assert len(await pings.send(Ping(key=k0, n=2), keys=["second"])) == 1
    assert (await pings.send(Ping(key=k0, n=2), keys=["second"])).duplicates == 1
    stored = await app.store.admin().scan(pings.partitions[0].id, None, 100)  # type: ignore[union-attr]
    assert [pings.decode(f).n for _, f in stored] == [0, 1, 2]
    assert xid in [x for x, _ in stored]
    await app.aclose()
