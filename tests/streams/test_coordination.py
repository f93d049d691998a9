"""Several executors of one processor: locks, heartbeats, membership, fencing, leadership.

Two in-process workers of one app run against the same Redis. What a store must do for
them is the contract suite's (tests/contract); the keys Redis keeps it in are looked at
in test_redis_coordination.py. No test asserts on how long anything took: waits poll
until a condition holds (or the hang guard fires).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
import redis

from runnel import App, Record, Stream
from runnel.exceptions import Unavailable
from runnel.processing.executor import Executor
from runnel.runtime.worker import Worker
from runnel.store.coordination import Member
from runnel_redis.transport import RedisTransport
from tests.support.apps import Running, eventually, keys_by_partition, make_app
from tests.support.coordination_keys import (
    COUNT,
    PROC,
    STREAM,
    beat_key,
    coordination,
    lock_key,
    lock_owners,
    membership,
    poll,
)

MULTI = {"default_lock_expiry": 2, "default_join_delay": 0, "default_read_timeout": 100}


class Ping(Record):
    key: str
    n: int


Seen = list[tuple[str, int, str, int, float]]
"""(worker tag, partition number, record key, record n, time.monotonic() when processed)"""


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


# Joining: join_delay is waited only when another executor is alive.


async def test_a_worker_alone_joins_without_waiting_join_delay(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    seen: Seen = []
    # An hour's delay: had it been waited, the partitions would never be owned here.
    app, _ = declare(app_name, redis_url, "a", seen, default_join_delay=3600)
    async with Running(app) as running:
        e = executor(running)
        await running.until(lambda: e.runner.owned == set(range(COUNT)), "alone, owns all")
        assert list(membership(redis_client, app_name)) == [e.id]
        assert await running.stop() == 0


async def test_join_delay_is_waited_only_beside_a_live_executor(
    redis_url: str, app_name: str, redis_client: redis.Redis, transport: RedisTransport
) -> None:
    seen: Seen = []
    first, _ = declare(app_name, redis_url, "a", seen)
    second, _ = declare(app_name, redis_url, "b", seen, default_join_delay=3600)
    waiting = Worker(second).executors[0]  # not run: asked only whether it would wait
    assert await waiting._others_alive() is False  # nobody there
    async with Running(first) as running:
        e = executor(running)
        await running.until(lambda: e.runner.owned == set(range(COUNT)), "first owns all")
        assert await waiting._others_alive() is True
        assert await running.stop() == 0
    assert await waiting._others_alive() is False  # it left
    # A member left behind by a crash (its heartbeat expired) is nobody either.
    left = coordination(transport, app_name)
    crashed = Member(partitions=list(range(COUNT)), host="gone", pid=1, worker="gone:1:000000")
    await left.change_members(lambda members: {**members, "crashed": crashed}, "join", "crashed")
    assert list(membership(redis_client, app_name)) == ["crashed"]
    assert await waiting._others_alive() is False
