"""Several executors of one processor: locks, heartbeats, membership, fencing, leadership.

The first tests drive :class:`RedisCoordination` and :class:`RedisLeadership` directly;
the others run two in-process workers of one app against the same Redis. No test asserts
on how long anything took: waits poll until a condition holds (or the hang guard fires).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis

from runnel import App, Record, Stream
from runnel.exceptions import Unavailable
from runnel.processing.executor import Executor
from runnel.runtime.worker import Worker
from runnel.store.coordination import Member, Members
from runnel.store.log import NEW, PENDING, PartitionId
from runnel_redis import keys, resp
from runnel_redis.coordination import RedisCoordination
from runnel_redis.transport import RedisTransport

from .conftest import HANG_GUARD, Running, eventually, keys_by_partition, make_app
from .conftest import pending_ids as redis_pending_ids

STREAM = "pings"
PROC = "proc"
COUNT = 8
GROUP = PROC  # consumer groups are named after processors
CONSUMER = "runnel"
MULTI = {"default_lock_expiry": 2, "default_join_delay": 0, "default_read_timeout": 100}


class Ping(Record):
    key: str
    n: int


Seen = list[tuple[str, int, str, int, float]]
"""(worker tag, partition number, record key, record n, time.monotonic() when processed)"""


@pytest.fixture
async def transport(redis_url: str) -> AsyncIterator[RedisTransport]:
    t = RedisTransport(redis_url)
    yield t
    await t.aclose()


def lock_key(app: str, n: int | str) -> str:
    return f"__lock:{app}.{STREAM}.{PROC}.{n}"


def beat_key(app: str, owner: str) -> str:
    return f"__beat:{app}.{STREAM}.{PROC}.{owner}"


def membership(client: redis.Redis, app: str) -> dict[str, Any]:
    raw = client.get(f"__memb:{app}.{STREAM}.{PROC}")
    return json.loads(raw) if raw else {}


def lock_owners(client: redis.Redis, app: str) -> dict[int, str | None]:
    values = client.mget([lock_key(app, n) for n in range(COUNT)])
    return {n: v.decode() if v else None for n, v in enumerate(values)}


def stream_key(app: str, n: int) -> PartitionId:
    return PartitionId(app, STREAM, n)


def pending_ids(client: redis.Redis, partition: PartitionId, group: str) -> list[bytes]:
    return redis_pending_ids(client, keys.partition(*partition), group)


class ByNumber:
    """The real coordination, its lock methods called with partition numbers (as these
    tests name partitions) rather than :class:`PartitionId`\\ s."""

    def __init__(self, inner: RedisCoordination, app: str) -> None:
        self.inner, self.app = inner, app

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _ids(self, numbers: Any) -> list[PartitionId]:
        return [PartitionId(self.app, STREAM, n) for n in numbers]

    async def acquire(self, owner: str, numbers: list[int], ttl_ms: int) -> set[int]:
        return {p.number for p in await self.inner.acquire(owner, self._ids(numbers), ttl_ms)}

    async def release(self, owner: str, numbers: list[int]) -> None:
        await self.inner.release(owner, self._ids(numbers))

    async def beat(self, owner: str, numbers: list[int], ttl_ms: int) -> set[int]:
        return {p.number for p in await self.inner.beat(owner, self._ids(numbers), ttl_ms)}

    async def lock_owners(self, count: int) -> dict[int, str | None]:
        owners = await self.inner.lock_owners(self._ids(range(count)))
        return {p.number: owner for p, owner in owners.items()}

    def lock_key(self, number: int) -> str:
        return self.inner.lock_key(PartitionId(self.app, STREAM, number))


def coordination(transport: RedisTransport, app: str) -> ByNumber:
    return ByNumber(transport.coordination(app, STREAM, PROC), app)


async def poll(check: Callable[[], Any], what: str) -> None:
    """Await ``check()`` until it is truthy (the hang guard bounds the wait)."""
    async with asyncio.timeout(HANG_GUARD):
        while True:
            if await check():
                return
            await asyncio.sleep(0.01)


# Coordination primitives.


async def test_acquire_takes_free_locks_refreshes_own_and_refuses_others(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    c = coordination(transport, app_name)
    assert await c.acquire("a", [0, 1, 2], 10_000) == {0, 1, 2}
    assert await c.acquire("b", [1, 2, 3], 10_000) == {3}
    assert await c.acquire("b", [], 10_000) == set()
    assert redis_client.get(lock_key(app_name, 1)) == b"a"
    assert 0 < redis_client.pttl(lock_key(app_name, 3)) <= 10_000

    # Our own lock is refreshed...
    redis_client.pexpire(lock_key(app_name, 0), 1_000)
    assert await c.acquire("a", [0], 600_000) == {0}
    assert redis_client.pttl(lock_key(app_name, 0)) > 1_000
    # ...someone else's is neither taken nor extended.
    redis_client.pexpire(lock_key(app_name, 1), 50_000)
    assert await c.acquire("b", [1], 600_000) == set()
    assert redis_client.get(lock_key(app_name, 1)) == b"a"
    assert redis_client.pttl(lock_key(app_name, 1)) <= 50_000

    assert await c.lock_owners(5) == {0: "a", 1: "a", 2: "a", 3: "b", 4: None}

    # Release deletes only what the caller holds.
    await c.release("a", [0, 3])
    assert await c.lock_owners(4) == {0: None, 1: "a", 2: "a", 3: "b"}
    await c.release("b", [1, 2, 3])
    assert await c.lock_owners(4) == {0: None, 1: "a", 2: "a", 3: None}
    await c.release("a", [])
    assert await c.lock_owners(4) == {0: None, 1: "a", 2: "a", 3: None}

    # A released lock is free for anyone.
    assert await c.acquire("b", [0, 1, 3], 10_000) == {0, 3}


async def test_beat_refreshes_the_heartbeat_and_reports_the_locks_still_ours(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    c = coordination(transport, app_name)
    assert await c.acquire("a", [0, 1], 10_000) == {0, 1}
    assert await c.acquire("b", [2], 10_000) == {2}
    assert await c.alive(["a", "b"]) == set()

    redis_client.pexpire(lock_key(app_name, 0), 1_000)
    redis_client.pexpire(lock_key(app_name, 2), 5_000)
    assert await c.beat("a", [0, 1, 2, 3], 30_000) == {0, 1}
    assert redis_client.get(beat_key(app_name, "a")) == b"a"
    assert 0 < redis_client.pttl(beat_key(app_name, "a")) <= 30_000
    assert redis_client.pttl(lock_key(app_name, 0)) > 1_000  # ours: extended
    assert redis_client.pttl(lock_key(app_name, 2)) <= 5_000  # b's: left alone
    # A beat takes no free lock.
    assert await c.lock_owners(4) == {0: "a", 1: "a", 2: "b", 3: None}
    assert await c.alive(["a", "b", "nobody"]) == {"a"}

    # A lock someone else took meanwhile is reported as no longer ours.
    redis_client.delete(lock_key(app_name, 1))
    assert await c.acquire("b", [1], 10_000) == {1}
    assert await c.beat("a", [0, 1], 30_000) == {0}
    assert await c.beat("a", [], 30_000) == set()

    # alive() follows heartbeat expiry.
    assert await c.beat("b", [], 60_000) == set()
    assert await c.alive(["a", "b"]) == {"a", "b"}
    assert await c.alive([]) == set()
    await c.beat("b", [], 100)  # a short ttl: b stops beating now
    assert 0 < redis_client.pttl(beat_key(app_name, "b")) <= 100

    async def b_expired() -> bool:
        return await c.alive(["a", "b"]) == {"a"}

    await poll(b_expired, "b's heartbeat expired")
    assert not redis_client.exists(beat_key(app_name, "b"))
    await c.beat("b", [2], 60_000)  # beating again: alive again
    assert await c.alive(["a", "b"]) == {"a", "b"}


async def test_change_members_is_serialized_by_the_admin_lock(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    c = coordination(transport, app_name)
    admin = lock_key(app_name, "admin")
    control = f"__ctrl:{app_name}.{STREAM}.{PROC}"
    assert await c.members() == {}

    def append(i: int) -> Callable[[Members], Members]:
        def change(members: Members) -> Members:
            log = members.get("log", Member())
            return {**members, "log": Member(partitions=[*log.partitions, i])}

        return change

    # 20 concurrent read-modify-writes: without the lock most appends would be lost.
    results = await asyncio.gather(
        *(c.change_members(append(i), f"reason{i}", f"e{i}") for i in range(20))
    )
    for i, members in enumerate(results):
        assert members["log"].partitions[-1] == i  # each call returns its own result
    items = membership(redis_client, app_name)["log"]["partitions"]
    assert sorted(items) == list(range(20))
    assert {k: m.to_json() for k, m in (await c.members()).items()} == membership(
        redis_client, app_name
    )
    assert not redis_client.exists(admin)

    # One control message per change.
    messages = redis_client.xrange(control)
    assert len(messages) == 20
    assert {(m[b"reason"], m[b"executor"]) for _, m in messages} == {
        (f"reason{i}".encode(), f"e{i}".encode()) for i in range(20)
    }

    # While someone else holds the admin lock, a change waits for it.
    redis_client.set(admin, "someone", px=60_000)
    waiting = asyncio.create_task(c.change_members(append(99), "blocked", "x"))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    assert 99 not in membership(redis_client, app_name)["log"]["partitions"]
    assert redis_client.get(admin) == b"someone"
    redis_client.delete(admin)
    async with asyncio.timeout(HANG_GUARD):
        members = await waiting
    assert members["log"].partitions[-1] == 99
    assert membership(redis_client, app_name) == {k: m.to_json() for k, m in members.items()}
    assert redis_client.xlen(control) == 21

    # A failing change writes nothing, announces nothing and frees the admin lock.
    def broken(members: Members) -> Members:
        raise ValueError("broken change")

    with pytest.raises(ValueError, match="broken change"):
        await c.change_members(broken, "broken", "x")
    assert membership(redis_client, app_name) == {k: m.to_json() for k, m in members.items()}
    assert redis_client.xlen(control) == 21
    assert not redis_client.exists(admin)


async def test_control_returns_the_messages_after_a_position(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    c = coordination(transport, app_name)
    assert await c.control_tail() == b"0-0"
    assert await c.control(b"0-0", 50) == (b"0-0", [])

    await c.announce("join", "e1")
    await c.change_members(lambda m: {**m, "e2": Member()}, "leave", "e2")
    first, second = (xid for xid, _ in redis_client.xrange(f"__ctrl:{app_name}.{STREAM}.{PROC}"))
    assert await c.control_tail() == second

    assert await c.control(b"0-0", 50) == (
        second,
        [{"reason": "join", "executor": "e1"}, {"reason": "leave", "executor": "e2"}],
    )
    assert await c.control(first, 50) == (second, [{"reason": "leave", "executor": "e2"}])
    assert await c.control(second, 50) == (second, [])

    # A blocked reader gets a message announced while it waits.
    waiting = asyncio.create_task(c.control(second, 5_000))
    await asyncio.sleep(0.05)
    await c.announce("dead", "e3")
    async with asyncio.timeout(HANG_GUARD):
        position, messages = await waiting
    assert messages == [{"reason": "dead", "executor": "e3"}]
    assert position == await c.control_tail()


# Fencing.


async def _partitions_with_entries(
    transport: RedisTransport, app: str, n: int
) -> list[PartitionId]:
    streams = [stream_key(app, p) for p in range(n)]
    await transport.ensure_group(streams, GROUP)
    for key in streams:
        await transport.append([(key, {b"n": str(i).encode()}) for i in range(3)])
    return streams


@pytest.mark.parametrize("count", [3, 100])
async def test_fenced_read_and_ack_only_on_partitions_we_hold(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis, count: int
) -> None:
    c = coordination(transport, app_name)
    k0, k1, k2 = await _partitions_with_entries(transport, app_name, 3)
    assert await c.acquire("a", [0], 30_000) == {0}
    assert await c.acquire("b", [1], 30_000) == {1}  # partition 2: nobody's

    result = await c.read("a", CONSUMER, {k0: NEW, k1: NEW, k2: NEW}, count)
    assert result.lost == [k1, k2]
    assert [key for key, _ in result.entries] == [k0]
    assert [fields[b"n"] for _, fields in result.entries[0][1]] == [b"0", b"1", b"2"]
    ids0 = [xid for xid, _ in result.entries[0][1]]
    assert pending_ids(redis_client, k0, GROUP) == ids0
    assert pending_ids(redis_client, k1, GROUP) == []  # nothing was delivered
    assert pending_ids(redis_client, k2, GROUP) == []

    # Nothing held at all: nothing read.
    result = await c.read("a", CONSUMER, {k1: NEW}, count)
    assert (result.entries, result.lost) == ([], [k1])
    assert pending_ids(redis_client, k1, GROUP) == []

    result = await c.read("b", CONSUMER, {k1: NEW}, count)
    assert result.lost == []
    ids1 = [xid for xid, _ in result.entries[0][1]]
    assert len(ids1) == 3

    # Acknowledging on someone else's partition: refused, the entries stay pending.
    assert await c.ack("a", {k1: ids1}) == [k1]
    assert pending_ids(redis_client, k1, GROUP) == ids1
    # Several partitions at once: ours are acknowledged, the other is refused.
    assert await c.ack("a", {k0: ids0[:1], k1: ids1}) == [k1]
    assert pending_ids(redis_client, k0, GROUP) == ids0[1:]
    assert pending_ids(redis_client, k1, GROUP) == ids1
    assert await c.ack("a", {k0: ids0[1:]}) == []
    assert pending_ids(redis_client, k0, GROUP) == []
    # The holder can acknowledge.
    assert await c.ack("b", {k1: ids1}) == []
    assert pending_ids(redis_client, k1, GROUP) == []


async def test_fenced_ack_of_many_ids_goes_in_chunks(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    c = coordination(transport, app_name)
    k0, k1 = (stream_key(app_name, p) for p in range(2))
    await transport.ensure_group([k0, k1], GROUP)
    for key in (k0, k1):
        await transport.append([(key, {b"n": str(i).encode()}) for i in range(2500)])
    assert await c.acquire("a", [0], 30_000) == {0}
    assert await c.acquire("b", [1], 30_000) == {1}
    ids = {}
    for owner, key in (("a", k0), ("b", k1)):
        result = await c.read(owner, CONSUMER, {key: NEW}, 5000)
        ids[key] = [xid for xid, _ in result.entries[0][1]]
        assert len(ids[key]) == 2500

    assert await c.ack("a", {k1: ids[k1]}) == [k1]
    assert len(pending_ids(redis_client, k1, GROUP)) == 2500
    assert await c.ack("a", {k0: ids[k0], k1: ids[k1]}) == [k1]
    assert pending_ids(redis_client, k0, GROUP) == []
    assert len(pending_ids(redis_client, k1, GROUP)) == 2500
    assert await c.ack("b", {k1: ids[k1]}) == []
    assert pending_ids(redis_client, k1, GROUP) == []


async def test_an_old_owner_cannot_ack_after_its_lock_expired_and_was_taken(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    c = coordination(transport, app_name)
    [k0] = await _partitions_with_entries(transport, app_name, 1)
    assert await c.acquire("a", [0], 200) == {0}
    result = await c.read("a", CONSUMER, {k0: NEW}, 10)
    ids = [xid for xid, _ in result.entries[0][1]]
    assert len(ids) == 3

    await eventually(lambda: not redis_client.exists(lock_key(app_name, 0)), "a's lock expired")
    assert await c.acquire("b", [0], 30_000) == {0}

    assert await c.ack("a", {k0: ids}) == [k0]
    assert pending_ids(redis_client, k0, GROUP) == ids
    assert (await c.read("a", CONSUMER, {k0: PENDING}, 10)).lost == [k0]
    assert await c.beat("a", [0], 30_000) == set()
    assert await c.lock_owners(1) == {0: "b"}

    # The new owner reads the unacknowledged entries again and acknowledges them.
    result = await c.read("b", CONSUMER, {k0: PENDING}, 10)
    assert [xid for xid, _ in result.entries[0][1]] == ids
    assert await c.ack("b", {k0: ids}) == []
    assert pending_ids(redis_client, k0, GROUP) == []


# Two in-process workers.


def declare(
    app_name: str, redis_url: str, tag: str, seen: Seen, **settings: Any
) -> tuple[App, Stream]:
    app = make_app(app_name, redis_url, **{**MULTI, **settings})
    pings = app.stream(STREAM, record=Ping, partition_by="key", partition_count=COUNT)

    @app.processor(pings, name=PROC)
    async def proc(events):
        async for event in events:
            ping = event.record
            seen.append((tag, event.partition.number, ping.key, ping.n, time.monotonic()))

    return app, pings


def executor(running: Running) -> Executor:
    [e] = running.worker.executors
    return e


async def settled(client: redis.Redis, app: str, *runnings: Running) -> dict[str, set[int]]:
    """Wait until membership, runners and locks agree on an even split; executor -> owned."""
    ids = {executor(r).id for r in runnings}

    def check() -> dict[str, set[int]] | None:
        for r in runnings:
            if r.done:
                raise AssertionError(f"a worker ended: exit code {r.task.result()!r}")  # type: ignore[union-attr]
        members = membership(client, app)
        if set(members) != ids:
            return None
        owned = {executor(r).id: executor(r).runner.owned for r in runnings}
        if any(set(members[e]["partitions"]) != owned[e] for e in ids):
            return None
        if sorted(p for ps in owned.values() for p in ps) != list(range(COUNT)):
            return None
        if any(len(ps) != COUNT // len(ids) for ps in owned.values()):
            return None
        locks = lock_owners(client, app)
        if any(locks[p] != e for e, ps in owned.items() for p in ps):
            return None
        return owned

    return await eventually(check, "the executors settled")


async def test_two_workers_split_the_partitions_and_one_takes_over_when_the_other_stops(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    seen: Seen = []
    app_a, pings = declare(app_name, redis_url, "a", seen)
    app_b, _ = declare(app_name, redis_url, "b", seen)
    routing = keys_by_partition(pings, lambda k: Ping(key=k, n=0), COUNT)
    routing += [f"extra{i}" for i in range(8)]

    async with Running(app_a) as a, Running(app_b) as b:
        ea, eb = executor(a), executor(b)
        owned = await settled(redis_client, app_name, a, b)
        assert owned[ea.id].isdisjoint(owned[eb.id])
        assert len(owned[ea.id]) == len(owned[eb.id]) == COUNT // 2
        members = membership(redis_client, app_name)
        assert {e: sorted(m["partitions"]) for e, m in members.items()} == {
            e: sorted(ps) for e, ps in owned.items()
        }
        assert members[ea.id]["worker"] == a.worker.id
        assert members[eb.id]["worker"] == b.worker.id
        assert await ea.coordination.alive([ea.id, eb.id]) == {ea.id, eb.id}

        total = 400
        await pings.send(*[Ping(key=routing[n % len(routing)], n=n) for n in range(total)])
        await eventually(lambda: len(seen) >= total, "every event was processed")
        assert sorted(n for *_, n, _ in seen) == list(range(total)), "each event exactly once"
        by_key: dict[str, list[int]] = {}
        for tag, partition, key, n, _ in seen:
            by_key.setdefault(key, []).append(n)
            owner = ea if tag == "a" else eb
            assert partition in owned[owner.id], "processed by the partition's owner"
        for key, ns in by_key.items():
            assert ns == sorted(ns), key
        assert {tag for tag, *_ in seen} == {"a", "b"}

        # Stopping b hands its partitions to a.
        assert await b.stop() == 0
        assert eb.id not in lock_owners(redis_client, app_name).values(), "b released its locks"
        assert not eb.runner.owned
        owned = await settled(redis_client, app_name, a)
        assert owned == {ea.id: set(range(COUNT))}
        assert lock_owners(redis_client, app_name) == dict.fromkeys(range(COUNT), ea.id)

        before = len(seen)
        more = 100
        await pings.send(
            *[Ping(key=routing[n % len(routing)], n=n) for n in range(total, total + more)]
        )
        await eventually(lambda: len(seen) >= before + more, "a processed the new events")
        after = seen[before:]
        assert {tag for tag, *_ in after} == {"a"}
        assert sorted(n for *_, n, _ in after) == list(range(total, total + more))
        assert {p for _, p, *_ in after} == set(range(COUNT))
        assert await a.stop() == 0
    assert lock_owners(redis_client, app_name) == dict.fromkeys(range(COUNT))


async def test_two_workers_of_one_app_in_one_loop(
    redis_url: str, app_name: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """Workers of the same App object share its connections in a loop: the first to stop
    leaves cleanly without closing them under the other, which takes its partitions over
    and goes on processing."""
    seen: Seen = []
    app, pings = declare(app_name, redis_url, "one app", seen)
    routing = keys_by_partition(pings, lambda k: Ping(key=k, n=0), COUNT)

    async with Running(app) as a, Running(app) as b:
        ea, eb = executor(a), executor(b)
        await settled(redis_client, app_name, a, b)
        assert await b.stop() == 0
        assert membership(redis_client, app_name).keys() == {ea.id}, "b announced leaving"
        assert eb.id not in lock_owners(redis_client, app_name).values()
        assert await settled(redis_client, app_name, a) == {ea.id: set(range(COUNT))}

        await pings.send(*[Ping(key=k, n=n) for n, k in enumerate(routing)])
        await eventually(lambda: len(seen) >= COUNT, "a processed events sent after b left")
        assert await a.stop() == 0
    assert membership(redis_client, app_name) == {}
    assert lock_owners(redis_client, app_name) == dict.fromkeys(range(COUNT))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


@pytest.mark.parametrize("cut_off", [("beat",), ("beat", "members", "control")])
async def test_a_paused_owner_is_fenced_out_then_rejoins(
    redis_url: str,
    app_name: str,
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    cut_off: tuple[str, ...],
) -> None:
    """``cut_off``: the coordination calls of b that fail while it is "paused". With only
    the heartbeat failing, b still learns from the membership that it was declared dead;
    with the membership and the control stream failing too, only its lease and the
    fenced reads and acks keep it off the partitions a took over."""
    seen: Seen = []
    app_a, pings = declare(app_name, redis_url, "a", seen)
    app_b, _ = declare(app_name, redis_url, "b", seen)
    routing = keys_by_partition(pings, lambda k: Ping(key=k, n=0), COUNT)
    sent = 0
    producing = True

    async def produce() -> None:
        nonlocal sent
        while producing:
            await pings.send(*[Ping(key=k, n=sent + i) for i, k in enumerate(routing)])
            sent += len(routing)
            await asyncio.sleep(0.02)

    async with Running(app_a) as a, Running(app_b) as b:
        ea, eb = executor(a), executor(b)
        owned = await settled(redis_client, app_name, a, b)
        b_parts = owned[eb.id]
        producer = asyncio.create_task(produce())
        try:
            await eventually(
                lambda: {p for tag, p, *_ in seen if tag == "b"} == b_parts, "b is processing"
            )

            # b "pauses": its heartbeat no longer reaches Redis.
            async def unreachable(*args: Any, **kwargs: Any) -> Any:
                raise Unavailable("paused")

            for name in cut_off:
                monkeypatch.setattr(eb.coordination, name, unreachable)
            paused_at = time.monotonic()

            # a's maintenance declares b dead and a takes everything.
            def a_took_over() -> bool:
                return (
                    set(membership(redis_client, app_name)) == {ea.id}
                    and ea.runner.owned == set(range(COUNT))
                    and set(lock_owners(redis_client, app_name).values()) == {ea.id}
                )

            await a.until(a_took_over, "a took b's partitions")

            # b's lease expired: it starts no iteration any more. Told by the membership
            # that it was declared dead, it also gives its partitions up; cut off from
            # the membership too, it keeps its consumers, waiting for a heartbeat.
            def b_stopped() -> bool:
                return not eb.lease_valid() and ("members" in cut_off or not eb.runner.owned)

            await b.until(b_stopped, "b's lease expired")

            def a_processes_b_parts() -> bool:
                done = {p for tag, p, *_, t in seen if tag == "a" and t > paused_at}
                return b_parts <= done

            await a.until(a_processes_b_parts, "a processed b's partitions")
            during = list(seen)

            # b's heartbeat works again: it notices, rejoins and the two split evenly again.
            monkeypatch.undo()
            owned = await settled(redis_client, app_name, a, b)
            assert len(owned[ea.id]) == len(owned[eb.id]) == COUNT // 2
        finally:
            producing = False
            await producer

        # No partition was processed by both: after a's first event on one of b's
        # partitions, b processed nothing more there.
        for p in b_parts:
            first_a = min(t for tag, q, *_, t in during if tag == "a" and q == p and t > paused_at)
            late = [e for e in during if e[0] == "b" and e[1] == p and e[4] >= first_a]
            assert not late, f"partition {p}: b processed {late} after a took it over"

        # Nothing was lost (the fenced-out owner's unacknowledged events came again).
        await eventually(
            lambda: {n for *_, n, _ in seen} == set(range(sent)), "every event was processed"
        )
        assert await a.stop() == 0
        assert await b.stop() == 0


async def test_acquiring_a_lock_does_not_renew_the_lease_of_locks_lost_meanwhile(
    redis_url: str,
    app_name: str,
    redis_client: redis.Redis,
    transport: RedisTransport,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While its heartbeat fails, an executor's locks expire and another owner takes one;
    getting some *other* lock meanwhile must not let it start iterations on the lost one."""
    seen: Seen = []
    gate = asyncio.Event()
    app = make_app(app_name, redis_url, **MULTI, default_assignment_sleep=0.1)
    pings = app.stream(STREAM, record=Ping, partition_by="key", partition_count=COUNT)

    @app.processor(pings, name=PROC)
    async def proc(events):
        async for event in events:
            ping = event.record
            seen.append(("w", event.partition.number, ping.key, ping.n, time.monotonic()))
            if ping.n == 0:
                await gate.wait()  # the first iteration is in flight until the gate opens

    [key] = keys_by_partition(pings, lambda k: Ping(key=k, n=0), 1)
    p0 = pings.partition_number(Ping(key=key, n=0))
    q = (p0 + 1) % COUNT
    others = coordination(transport, app_name)
    assert await others.acquire("intruder", [q], 120_000) == {q}

    async with Running(app) as w:
        e = executor(w)
        await w.until(lambda: e.runner.owned == set(range(COUNT)) - {q}, "w took the free locks")
        await pings.send(*[Ping(key=key, n=n) for n in range(20)])
        inbox = e.runner.inboxes[pings.partitions[p0].id]
        await w.until(
            lambda: any(x[3] == 0 for x in seen) and not inbox.wants_more,
            "one iteration in flight on p0, its inbox full behind it",
        )

        async def unreachable(*args: Any, **kwargs: Any) -> Any:
            raise Unavailable("paused")

        monkeypatch.setattr(e.coordination, "beat", unreachable)

        async def stolen() -> bool:
            return await others.acquire("thief", [p0], 120_000) == {p0}

        await poll(stolen, "w's lock on p0 expired and the thief took it")
        stolen_at = time.monotonic()
        assert not e.lease_valid()

        # w finally gets the lock it was waiting for (q), its heartbeat still failing.
        await others.release("intruder", [q])
        await w.until(lambda: q in e.runner.owned, "w took q")

        gate.set()  # the iteration in flight on p0 ends; w must not start another there
        await asyncio.sleep(0.2)  # a chance to go wrong (nothing is timed)
        monkeypatch.undo()  # the next beat tells w it lost p0
        await w.until(lambda: p0 not in e.runner.owned, "w noticed it lost p0")
        late = [x[3] for x in seen if x[1] == p0 and x[4] > stolen_at]
        assert not late, f"w processed events {late} of p{p0} while the thief held its lock"
        assert redis_client.get(lock_key(app_name, p0)) == b"thief"


# Leadership.


async def test_leadership_claim_resign_and_leader(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    election = transport.leadership(app_name)
    other = transport.leadership(app_name)
    assert await election.leader() is None
    assert await election.claim("a", 10_000)
    assert not await other.claim("b", 10_000)
    assert await other.leader() == "a"
    assert redis_client.get(f"__lead:{app_name}") == b"a"

    redis_client.pexpire(f"__lead:{app_name}", 1_000)
    assert await election.claim("a", 600_000)  # staying leader refreshes the claim
    assert redis_client.pttl(f"__lead:{app_name}") > 1_000

    await other.resign("b")  # not the leader: nothing happens
    assert await election.leader() == "a"
    await election.resign("a")
    assert await election.leader() is None
    assert await other.claim("b", 100)
    assert not await election.claim("a", 10_000)
    await eventually(lambda: not redis_client.exists(f"__lead:{app_name}"), "b's claim expired")
    assert await election.leader() is None
    assert await election.claim("a", 10_000)
    assert await election.leader() == "a"


async def test_leader_jobs_run_on_one_worker_at_a_time_and_move_when_it_stops(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    runs: list[str] = []
    workers: dict[str, Worker] = {}

    def declare_leader(tag: str) -> App:
        app = make_app(app_name, redis_url, leadership_poll_interval=100)

        @app.timer(interval=0.05, on_leader=True)
        async def tick():
            runs.append(workers[tag].id)

        return app

    both_leading = 0

    async def watch(x: Worker, y: Worker) -> None:
        nonlocal both_leading
        while True:
            both_leading += x.is_leader() and y.is_leader()
            await asyncio.sleep(0.005)

    async with Running(declare_leader("a")) as a, Running(declare_leader("b")) as b:
        workers.update(a=a.worker, b=b.worker)
        watching = asyncio.create_task(watch(a.worker, b.worker))
        try:
            await eventually(lambda: len(runs) >= 10, "the leader's timer ran")
            leader_id = runs[0]
            leader, follower = (a, b) if leader_id == a.worker.id else (b, a)
            assert set(runs) == {leader_id}, "only the leader's timer runs"
            assert leader.worker.is_leader() and not follower.worker.is_leader()
            assert redis_client.get(f"__lead:{app_name}") == leader_id.encode()

            assert await leader.stop() == 0
            before = len(runs)
            await follower.until(
                lambda: runs[before:].count(follower.worker.id) >= 5, "the follower took over"
            )
            assert set(runs[before:]) == {follower.worker.id}
            assert follower.worker.is_leader()
            assert redis_client.get(f"__lead:{app_name}") == follower.worker.id.encode()
        finally:
            watching.cancel()
        assert both_leading == 0
        assert await follower.stop() == 0
    assert not redis_client.exists(f"__lead:{app_name}"), "a stopping leader resigns"


# Stopping.


async def test_stop_while_waiting_for_a_lock_held_by_someone_else(
    redis_url: str, app_name: str, redis_client: redis.Redis, transport: RedisTransport
) -> None:
    seen: Seen = []
    app, _ = declare(app_name, redis_url, "a", seen, default_assignment_sleep=60)
    intruder = coordination(transport, app_name)
    assert await intruder.acquire("intruder", [0], 120_000) == {0}

    async with Running(app) as running:
        e = executor(running)
        await running.until(
            lambda: e.runner.owned == set(range(1, COUNT)), "the free partitions were taken"
        )
        assert membership(redis_client, app_name)[e.id]["partitions"] == list(range(COUNT))
        # The rebalance is waiting for partition 0's lock; a stop must not wait for it.
        assert await running.stop() == 0
    assert lock_owners(redis_client, app_name) == {
        0: "intruder",
        **dict.fromkeys(range(1, COUNT)),
    }
    assert membership(redis_client, app_name) == {}


async def test_stop_while_joining_waits_for_no_admin_lock(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    seen: Seen = []
    app, _ = declare(app_name, redis_url, "a", seen)
    admin = lock_key(app_name, "admin")
    redis_client.set(admin, "someone", px=120_000)

    async with Running(app) as running:
        e = executor(running)
        # The executor beats just before it tries to join: it is now waiting for the lock.
        await running.until(lambda: redis_client.exists(beat_key(app_name, e.id)), "joining")
        assert await running.stop() == 0
    assert redis_client.get(admin) == b"someone"
    assert membership(redis_client, app_name) == {}
    assert not e.runner.owned


async def test_read_is_refused_when_a_lock_changes_between_check_and_read(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    """The WATCH half of the fence: a lock taken over after the check (here by a command
    slipped in right after it, as a stand-in for another process) and Redis refuses the
    read; the next attempt's check sees the lock is gone."""
    c = coordination(transport, app_name)
    [k0] = await _partitions_with_entries(transport, app_name, 1)
    assert await c.acquire("a", [0], 30_000) == {0}
    lock = c.lock_key(0)
    exchanges: list[list] = []
    real = c.inner._exchange
    multi = resp.command("MULTI")

    async def stealing(packed: bytes, replies: int) -> list:
        if not exchanges:  # once: after the check, "b" takes the lock
            packed = packed.replace(multi, resp.command("SET", lock, "b") + multi, 1)
            replies += 1
        got = await real(packed, replies)
        exchanges.append(got)
        return got

    c.inner._exchange = stealing  # type: ignore[method-assign]
    result = await c.read("a", CONSUMER, {k0: NEW}, 10)
    assert exchanges[0][1] == [1]  # the check passed...
    assert exchanges[0][-1] is None  # ...and Redis refused the read all the same
    assert exchanges[1][1] == [0]  # the second attempt's check saw it
    assert (result.entries, result.lost) == ([], [k0])
    assert pending_ids(redis_client, k0, GROUP) == []
    assert redis_client.get(lock) == b"b"


async def test_read_leaves_other_locks_as_they_were(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    """The check touches locks that are not ours only so that Redis refuses the read: a
    lock held by another keeps its holder and its expiry, a free one stays free, and
    neither partition has anything delivered."""
    c = coordination(transport, app_name)
    k0, k1, k2 = await _partitions_with_entries(transport, app_name, 3)
    assert await c.acquire("a", [0], 30_000) == {0}
    assert await c.acquire("b", [1], 30_000) == {1}
    for others in ({k1: NEW}, {k2: NEW}, {k1: NEW, k2: NEW}):
        result = await c.read("a", CONSUMER, {k0: PENDING, **others}, 10)
        assert result.lost == list(others)
        assert [key for key, _ in result.entries] == [k0]
    assert redis_client.get(c.lock_key(1)) == b"b"
    assert 29_000 < redis_client.pttl(c.lock_key(1)) <= 30_000
    assert not redis_client.exists(c.lock_key(2))
    assert pending_ids(redis_client, k1, GROUP) == []
    assert pending_ids(redis_client, k2, GROUP) == []


async def test_read_errors_are_raised(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    """A partition without its consumer group: the error inside the transaction is
    raised (the fetcher retries), and reading works again once the group is there."""
    c = coordination(transport, app_name)
    assert await c.acquire("a", [0], 30_000) == {0}
    key = stream_key(app_name, 0)
    redis_client.xadd(keys.partition(*key), {"n": "0"})  # a stream, but no group
    with pytest.raises(redis.ResponseError, match="NOGROUP"):
        await c.read("a", CONSUMER, {key: NEW}, 10)
    await transport.ensure_group([key], GROUP)
    result = await c.read("a", CONSUMER, {key: NEW}, 10)
    assert [len(entries) for _, entries in result.entries] == [1]


async def test_acknowledging_thousands_of_ids_at_once(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    """More ids for one partition than the script passes to one XACK (1000), next to a
    partition with a few: all acknowledged."""
    c = coordination(transport, app_name)
    k0, k1 = (stream_key(app_name, p) for p in range(2))
    await transport.ensure_group([k0, k1], GROUP)
    await transport.append([(k0, {b"n": str(i).encode()}) for i in range(2500)])
    await transport.append([(k1, {b"n": b"x"}), (k1, {b"n": b"y"})])
    assert await c.acquire("a", [0, 1], 30_000) == {0, 1}
    result = await c.read("a", CONSUMER, {k0: NEW, k1: NEW}, 5000)
    ids = {key: [xid for xid, _ in entries] for key, entries in result.entries}
    assert [len(ids[k0]), len(ids[k1])] == [2500, 2]
    assert await c.ack("a", ids) == []
    assert pending_ids(redis_client, k0, GROUP) == []
    assert pending_ids(redis_client, k1, GROUP) == []
