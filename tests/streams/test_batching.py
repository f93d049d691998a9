"""Batching with ``events.take(n, within)``."""

from __future__ import annotations

from typing import Any

import redis

from runnel import Event, ExceptionPolicy, Record
from runnel.interfaces import Middleware
from tests.support.apps import Running, make_app, pending_ids, pending_or_none


class Ping(Record):
    key: str
    n: int


class Boom(Exception):
    pass


async def test_batches_are_bounded_and_in_order(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    batches: list[list[Ping]] = []
    total = 97

    @app.processor(pings, prefetch_count=8)
    async def proc(events):
        async for batch in events.take(5, within=0.05).records():
            assert isinstance(batch, list)
            assert all(isinstance(r, Ping) for r in batch)
            assert {pings.partition_number(r) for r in batch} == {events.partition.number}
            batches.append(batch)

    keys = ["a", "b", "c", "d", "e"]
    await pings.send(*[Ping(key=keys[i % 5], n=i) for i in range(total)])
    async with Running(app) as running:
        await running.until(lambda: sum(map(len, batches)) == total, "all events")
        assert await running.stop() == 0

    assert all(1 <= len(b) <= 5 for b in batches)
    assert any(len(b) == 5 for b in batches)
    flat = [r.n for b in batches for r in b]
    assert sorted(flat) == list(range(total))
    for number in range(2):
        ns = [r.n for b in batches for r in b if pings.partition_number(r) == number]
        assert ns == sorted(ns), number
    for p in pings.partitions:
        assert pending_ids(redis_client, p.key, "proc") == []


async def test_a_partial_batch_comes_once_within_has_passed(redis_url: str, app_name: str) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    batches: list[list[int]] = []

    @app.processor(pings)
    async def proc(events):
        async for batch in events.take(10, within=0.2).records():
            batches.append([r.n for r in batch])

    await pings.send(*[Ping(key="k", n=i) for i in range(3)])
    async with Running(app) as running:
        await running.until(lambda: batches, "the first batch")
        assert batches == [[0, 1, 2]]
        await pings.send(*[Ping(key="k", n=i) for i in range(3, 5)])
        await running.until(lambda: len(batches) == 2, "the second batch")
        assert batches == [[0, 1, 2], [3, 4]]
        assert await running.stop() == 0


async def test_a_batch_is_acknowledged_as_a_whole_after_its_iteration(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    def declare(seen: list[list[bytes]], fail_on_batch: int | None, middleware=()):
        app = make_app(app_name, redis_url)
        pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)

        @app.processor(
            pings, name="proc", exception_policy=ExceptionPolicy.HALT, middleware=list(middleware)
        )
        async def proc(events):
            async for batch in events.take(4, within=0.05):
                assert all(isinstance(e, Event) for e in batch)
                if len(seen) == fail_on_batch:
                    pending = pending_ids(redis_client, pings.partitions[0].key, "proc")
                    assert {e.xid for e in batch} <= set(pending), "in flight: not acked"
                    raise Boom("batch")
                seen.append([e.xid for e in batch])

        return app, pings

    passed: list[list[Any]] = []

    class Sizes(Middleware):
        async def handler(self, parent, **kwargs):
            async for items in parent:
                passed.append(items)
                yield items

    first: list[list[bytes]] = []
    app, pings = declare(first, fail_on_batch=1, middleware=[Sizes()])
    ids = await pings.send(*[Ping(key="k", n=i) for i in range(8)])
    key = pings.partitions[0].key
    async with Running(app) as running:
        assert await running.exit_code() == 1
    assert first == [ids[:4]]
    assert [len(items) for items in passed] == [4, 4], "middleware sees lists of events"
    pending = pending_ids(redis_client, key, "proc")
    assert pending == ids[4:], "the failed batch stays pending as a whole, the first is acked"

    second: list[list[bytes]] = []
    app2, _ = declare(second, fail_on_batch=None)
    async with Running(app2) as running:
        await running.until(lambda: sum(map(len, second)) == 4, "redelivery")
        assert await running.stop() == 0
    assert [x for b in second for x in b] == ids[4:]
    assert pending_ids(redis_client, key, "proc") == []


async def test_a_stop_while_a_batch_gathers_loses_nothing(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    def declare(seen: list[int]):
        app = make_app(app_name, redis_url)
        pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)

        @app.processor(pings, name="proc")
        async def proc(events):
            async for batch in events.take(10, within=30).records():
                seen.extend(r.n for r in batch)

        return app, pings

    first: list[int] = []
    app, pings = declare(first)
    await pings.send(*[Ping(key="k", n=i) for i in range(3)])
    key = pings.partitions[0].key
    async with Running(app) as running:
        # The batch is gathering (3 of 10, `within` far away) once all three are read.
        await running.until(lambda: len(pending_or_none(redis_client, key, "proc")) == 3, "reads")
        assert await running.stop() == 0  # the hang guard fails this if stop waits `within`

    second: list[int] = []
    app2, pings2 = declare(second)
    async with Running(app2) as running:
        await pings2.send(*[Ping(key="k", n=i) for i in range(3, 10)])
        await running.until(lambda: len(first) + len(second) == 10, "the rest")
        assert await running.stop() == 0
    assert sorted(first + second) == list(range(10))
    assert pending_ids(redis_client, key, "proc") == []
