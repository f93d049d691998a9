"""Acknowledgement: what finished is acknowledged; what did not is delivered again, first."""

from __future__ import annotations

import asyncio

import redis

from runnel import ExceptionPolicy, Record
from runnel.exceptions import Unavailable
from tests.support.apps import Running, all_pending, make_app, pending_ids


class Ping(Record):
    key: str
    n: int


async def test_graceful_stop_acknowledges_what_was_processed(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    total = 300

    def declare(seen: list[tuple[str, bytes, int]], slow: bool):
        app = make_app(app_name, redis_url)
        pings = app.stream("pings", record=Ping, partition_by="key", partition_count=3)

        @app.processor(pings, name="proc", prefetch_count=5)
        async def proc(events):
            async for event in events:
                if slow:
                    await asyncio.sleep(0.001)
                seen.append((event.partition.key, event.xid, event.record.n))

        return app, pings

    first: list[tuple[str, bytes, int]] = []
    app, pings = declare(first, slow=True)
    await pings.send(*[Ping(key=f"k{i % 5}", n=i) for i in range(total)])
    async with Running(app) as running:
        await running.until(lambda: len(first) >= 40, "some events were processed")
        assert await running.stop() == 0
    assert 0 < len(first) < total, "the stop should come in the middle of the backlog"

    # Ids are unique per partition only: compare (partition, id) pairs.
    pending = {
        (key, xid) for key, ids in all_pending(redis_client, pings, "proc").items() for xid in ids
    }
    processed = {(key, xid) for key, xid, _ in first}
    assert not pending & processed, "processed events must be acknowledged by a graceful stop"

    # A new worker processes the rest: everything exactly once, nothing left pending.
    second: list[tuple[str, bytes, int]] = []
    app2, pings2 = declare(second, slow=False)
    async with Running(app2) as running:
        await running.until(lambda: len(first) + len(second) >= total, "the rest was processed")
        assert await running.stop() == 0
    assert sorted(n for *_, n in first + second) == list(range(total))
    assert all_pending(redis_client, pings2, "proc") == {p.key: [] for p in pings2.partitions}


async def test_failed_event_is_not_acknowledged_and_comes_back_first(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    def declare(seen: list[int], fail_on: int | None):
        app = make_app(app_name, redis_url)
        pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)

        @app.processor(pings, name="proc", exception_policy=ExceptionPolicy.HALT)
        async def proc(events):
            async for ping in events.records():
                if ping.n == fail_on:
                    raise RuntimeError(f"cannot handle {ping.n}")
                seen.append(ping.n)

        return app, pings

    first: list[int] = []
    app, pings = declare(first, fail_on=3)
    ids = await pings.send(*[Ping(key="k", n=i) for i in range(10)])
    async with Running(app) as running:
        assert await running.exit_code() == 1
    assert first == [0, 1, 2]
    key = pings.partitions[0].key
    pending = pending_ids(redis_client, key, "proc")
    assert ids[3] in pending
    assert not set(ids[:3]) & set(pending)

    # More events arrive while nobody runs; a new worker (new App, same name) starts.
    await pings.send(*[Ping(key="k", n=i) for i in range(10, 15)])
    second: list[int] = []
    app2, _ = declare(second, fail_on=None)
    async with Running(app2) as running:
        await running.until(lambda: len(second) >= 12, "redelivery and new events")
        assert await running.stop() == 0
    assert second == list(range(3, 15))
    assert pending_ids(redis_client, key, "proc") == []


async def test_an_iteration_cut_short_by_the_grace_period_is_not_acknowledged(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url, default_grace_period=0.2)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    seen: list[int] = []
    marks: list[str] = []

    @app.processor(pings, name="proc")
    async def proc(events):
        async for ping in events.records():
            seen.append(ping.n)
            if ping.n == 2:
                try:
                    await asyncio.Event().wait()  # never finishes on its own
                finally:
                    marks.append("cancelled")

    ids = await pings.send(*[Ping(key="k", n=i) for i in range(4)])
    async with Running(app) as running:
        await running.until(lambda: seen == [0, 1, 2], "the stuck iteration")
        assert await running.stop() == 0
    assert marks == ["cancelled"]
    pending = pending_ids(redis_client, pings.partitions[0].key, "proc")
    assert ids[2] in pending
    assert not set(ids[:2]) & set(pending)


async def test_an_event_whose_iteration_returned_is_acknowledged(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    def declare(seen: list[int]):
        app = make_app(app_name, redis_url)
        pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)

        @app.processor(pings, name="proc")
        async def proc(events):
            async for ping in events.records():
                seen.append(ping.n)
                if ping.n == 1:
                    return  # done with this one; the framework restarts the processor

        return app, pings

    first: list[int] = []
    app, pings = declare(first)
    await pings.send(*[Ping(key="k", n=i) for i in range(4)])
    async with Running(app) as running:
        await running.until(lambda: len(first) == 4, "all events")
        assert await running.stop() == 0
    assert first == [0, 1, 2, 3]

    # A new owner must not get event 1 again (after 2 and 3, out of order).
    second: list[int] = []
    app2, pings2 = declare(second)
    async with Running(app2) as running:
        await pings2.send(Ping(key="k", n=4))
        await running.until(lambda: 4 in second, "the next event")
        assert await running.stop() == 0
    assert second == [4]
    assert pending_ids(redis_client, pings.partitions[0].key, "proc") == []


async def test_a_stop_acknowledges_everything_through_failing_sends(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """Redis refuses acknowledgements for a moment just as the worker stops: the stop
    keeps trying (within the grace period) instead of leaving finished events pending."""
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=3)
    seen: list[tuple[str, bytes]] = []

    @app.processor(pings, name="proc")
    async def proc(events):
        async for event in events:
            await asyncio.sleep(0.001)
            seen.append((event.partition.key, event.xid))

    await pings.send(*[Ping(key=f"k{i % 5}", n=i) for i in range(300)])
    async with Running(app) as running:
        await running.until(lambda: len(seen) >= 30, "some events were processed")
        coordination = running.worker.executors[0].coordination
        real_ack = coordination.ack
        failures = []

        async def flaky_ack(owner, ids):  # type: ignore[no-untyped-def]
            if len(failures) < 4:
                failures.append(ids)
                raise Unavailable("Redis went away for a moment")
            return await real_ack(owner, ids)

        coordination.ack = flaky_ack  # type: ignore[method-assign]
        assert await running.stop() == 0
    assert len(failures) == 4
    pending = {
        (key, xid) for key, ids in all_pending(redis_client, pings, "proc").items() for xid in ids
    }
    assert seen and not pending & set(seen)
