"""Exception policies: HALT, QUARANTINE and IGNORE."""

from __future__ import annotations

import asyncio
import logging

import pytest
import redis

from runnel import ExceptionPolicy, Record
from tests.support.apps import Running, all_pending, keys_by_partition, make_app, pending_ids


class Ping(Record):
    key: str
    n: int
    boom: bool = False


class Boom(Exception):
    pass


async def test_halt_stops_the_worker_and_keeps_the_failed_event(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=4)
    bad, *good = keys_by_partition(pings, lambda k: Ping(key=k, n=0), 4)
    finished: dict[str, list[bytes]] = {k: [] for k in good}
    failed: list[bytes] = []

    @app.processor(pings, exception_policy=ExceptionPolicy.HALT)
    async def proc(events):
        async for event in events:
            ping = event.record
            if ping.boom:
                failed.append(event.xid)
                raise Boom(ping.n)
            await asyncio.sleep(0.005)  # slow: the good partitions are mid-flight at the halt
            finished[ping.key].append(event.xid)

    await pings.send(*[Ping(key=k, n=i) for i in range(30) for k in good])
    async with Running(app) as running:
        await running.until(lambda: all(len(v) >= 3 for v in finished.values()), "good progress")
        ids = await pings.send(Ping(key=bad, n=0, boom=True), Ping(key=bad, n=1))
        assert await running.exit_code() == 1
    assert failed == [ids[0]]

    bad_key = pings.partition_for(Ping(key=bad, n=0)).key
    pending = all_pending(redis_client, pings, "proc")
    assert ids[0] in pending[bad_key]
    for key, xids in finished.items():
        partition = pings.partition_for(Ping(key=key, n=0)).key
        assert xids, key
        assert not set(xids) & set(pending[partition]), f"finished events of {key} not acked"
    assert sum(map(len, finished.values())) < 90, "the halt should stop the other partitions"


async def test_quarantine_skips_the_partition_and_the_worker_goes_on(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=4)
    bad, *good = keys_by_partition(pings, lambda k: Ping(key=k, n=0), 4)
    seen: dict[str, list[int]] = {k: [] for k in (bad, *good)}
    failures: list[int] = []

    @app.processor(pings, exception_policy=ExceptionPolicy.QUARANTINE)
    async def proc(events):
        async for ping in events.records():
            if ping.boom:
                failures.append(ping.n)
                raise Boom(ping.n)
            seen[ping.key].append(ping.n)

    await pings.send(*[Ping(key=k, n=i) for i in range(5) for k in (bad, *good)])
    async with Running(app) as running:
        await running.until(lambda: all(len(v) == 5 for v in seen.values()), "first round")
        ids = await pings.send(Ping(key=bad, n=5, boom=True), Ping(key=bad, n=6))
        await running.until(lambda: failures == [5], "the failure")
        # After the failure: the worker is up and the other partitions keep going.
        for round_ in range(3):
            await pings.send(*[Ping(key=k, n=10 + round_) for k in (*good, bad)])
            await running.until(
                lambda r=round_: all(len(seen[k]) == 6 + r for k in good), "more good events"
            )
        assert not running.done
        assert await running.stop() == 0

    for key in good:
        assert seen[key] == [0, 1, 2, 3, 4, 10, 11, 12]
    assert seen[bad] == [0, 1, 2, 3, 4], "a quarantined partition is not processed"
    assert failures == [5], "the failing event is not retried by this worker"
    bad_key = pings.partition_for(Ping(key=bad, n=0)).key
    assert ids[0] in pending_ids(redis_client, bad_key, "proc")
    for key in good:
        partition = pings.partition_for(Ping(key=key, n=0)).key
        assert pending_ids(redis_client, partition, "proc") == []


async def test_ignore_logs_acknowledges_and_goes_on(
    redis_url: str, app_name: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="runnel")

    def declare(attempts: list[int]):
        app = make_app(app_name, redis_url)
        pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)

        @app.processor(pings, name="proc", exception_policy=ExceptionPolicy.IGNORE)
        async def proc(events):
            async for ping in events.records():
                attempts.append(ping.n)
                if ping.boom:
                    raise Boom(f"failing on {ping.n}")

        return app, pings

    attempts: list[int] = []
    app, pings = declare(attempts)
    await pings.send(*[Ping(key="k", n=i, boom=i in (3, 4, 8)) for i in range(12)])
    async with Running(app) as running:
        await running.until(lambda: len(attempts) >= 12, "all events were tried")
        await pings.send(Ping(key="k", n=12))
        await running.until(lambda: 12 in attempts, "the event after the failures")
        assert not running.done
        assert await running.stop() == 0
    assert attempts == list(range(13)), "each event once, in order, failures included"

    logged = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], Boom)]
    assert [str(r.exc_info[1]) for r in logged] == ["failing on 3", "failing on 4", "failing on 8"]
    assert all(r.levelno >= logging.ERROR for r in logged)
    assert all_pending(redis_client, pings, "proc") == {p.key: [] for p in pings.partitions}

    # Not redelivered: a new worker sees only what is sent next.
    again: list[int] = []
    app2, pings2 = declare(again)
    async with Running(app2) as running:
        await pings2.send(Ping(key="k", n=100))
        await running.until(lambda: 100 in again, "the new event")
        assert await running.stop() == 0
    assert again == [100]


async def test_a_quarantined_partition_is_delivered_again_to_the_next_worker(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    def declare(seen: list[int], policy: ExceptionPolicy):
        app = make_app(app_name, redis_url)
        pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)

        @app.processor(pings, name="proc", exception_policy=policy)
        async def proc(events):
            async for ping in events.records():
                if ping.boom and policy is ExceptionPolicy.QUARANTINE:
                    raise Boom(ping.n)
                seen.append(ping.n)

        return app, pings

    first: list[int] = []
    app, pings = declare(first, ExceptionPolicy.QUARANTINE)
    ids = await pings.send(*[Ping(key="k", n=i, boom=i == 2) for i in range(5)])
    async with Running(app) as running:
        await running.until(lambda: any(c.poisoned for c in running.consumers()), "the quarantine")
        assert await running.stop() == 0
    assert first == [0, 1]
    assert pending_ids(redis_client, pings.partitions[0].key, "proc")[0] == ids[2]

    second: list[int] = []
    app2, _ = declare(second, ExceptionPolicy.HALT)
    async with Running(app2) as running:
        await running.until(lambda: len(second) == 3, "the redelivery")
        assert await running.stop() == 0
    assert second == [2, 3, 4]
