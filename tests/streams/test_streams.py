"""Events through processors, on both stores: order per key, acknowledgements,
redelivery after a worker dies, several workers sharing partitions, exception policies
and dead letters."""

from __future__ import annotations

import asyncio

import pytest

from runnel import App, Events, ExceptionPolicy, Record
from runnel.middleware import Dead, DeadLetterMiddleware
from runnel.testing import WorkerHalted, run, run_sync


class Order(Record):
    id: int
    user: str


def orders_app(name: str, partitions: int = 4) -> App:
    app = App(name=name)
    app.stream("orders", record=Order, partition_by="user", partition_count=partitions)
    return app


def batch(count: int, users: int = 5) -> list[Order]:
    return [Order(id=i, user=f"u{i % users}") for i in range(count)]


async def test_events_are_processed_in_order_per_key_and_acknowledged(
    app_name: str, store_url: str
) -> None:
    app = orders_app(app_name)
    orders = app.streams["orders"]
    seen: list[Order] = []

    @app.processor(orders)
    async def record(events: Events) -> None:
        async for order in events.records():
            seen.append(order)

    sent = batch(40)
    async with run(app, store=store_url) as t:
        await orders.send(*sent)
        await t.processed()
        assert sorted(o.id for o in seen) == list(range(40))
        for user in {o.user for o in sent}:
            assert [o.id for o in seen if o.user == user] == [o.id for o in sent if o.user == user]
        assert sorted(o.id for o in await t.acknowledged("record")) == list(range(40))
        assert sorted(o.id for o in await t.events(orders)) == list(range(40))
        assert t.failures == []


async def test_two_processors_each_see_every_event(app_name: str, store_url: str) -> None:
    app = orders_app(app_name)
    orders = app.streams["orders"]
    seen: dict[str, list[int]] = {"one": [], "two": []}

    @app.processor(orders)
    async def one(events: Events) -> None:
        async for order in events.records():
            seen["one"].append(order.id)

    @app.processor(orders)
    async def two(events: Events) -> None:
        async for order in events.records():
            seen["two"].append(order.id)

    async with run(app, store=store_url) as t:
        await orders.send(*batch(10))
        await t.processed()
    assert sorted(seen["one"]) == sorted(seen["two"]) == list(range(10))


async def test_an_event_in_flight_when_its_worker_dies_is_delivered_again(
    app_name: str, store_url: str
) -> None:
    """At least once: a worker stopped hard while processing an event never acknowledges
    it, so the next owner of the partition processes it again."""
    app = orders_app(app_name, partitions=1)
    orders = app.streams["orders"]
    seen: list[int] = []
    stuck = asyncio.Event()

    @app.processor(orders, lock_expiry=1)
    async def record(events: Events) -> None:
        async for order in events.records():
            seen.append(order.id)
            if order.id == 1 and seen.count(1) == 1:
                stuck.set()
                await asyncio.Event().wait()  # never returns: the worker dies meanwhile

    async with run(app, store=store_url) as t:
        await orders.send(*batch(3, users=1))
        await asyncio.wait_for(stuck.wait(), t.wait)
        await t.stop_worker(hard=True)
        assert [o.id for o in await t.acknowledged("record")] == [0]
        await t.start_worker()
        await t.processed()
        assert seen == [0, 1, 1, 2]
        assert [o.id for o in await t.acknowledged("record")] == [0, 1, 2]


async def test_several_workers_share_the_partitions_and_rebalance(
    app_name: str, store_url: str
) -> None:
    """Workers of one app in one process split the partitions, none owned twice; when
    one stops, the others take its partitions over and nothing is lost."""
    app = orders_app(app_name, partitions=6)
    orders = app.streams["orders"]
    seen: list[int] = []

    @app.processor(orders)
    async def record(events: Events) -> None:
        async for order in events.records():
            seen.append(order.id)

    async with run(app, store=store_url, workers=3) as t:
        await orders.send(*batch(60, users=12))
        await t.processed()

        async def owned() -> dict[str, set[int]]:
            while True:
                held = t.partitions("record")
                numbers = [n for ns in held.values() for n in ns]
                if sorted(numbers) == list(range(6)):
                    return held
                assert len(numbers) == len(set(numbers)), f"a partition owned twice: {held}"
                await asyncio.sleep(0.01)

        held = await asyncio.wait_for(owned(), t.wait)
        assert len(held) == 3
        await t.stop_worker(t.workers[0])
        held = await asyncio.wait_for(owned(), t.wait)
        assert len(held) == 2
        await orders.send(*[Order(id=i, user=f"u{i % 12}") for i in range(60, 120)])
        await t.processed()
    assert sorted(seen) == list(range(120))


async def test_halt_surfaces_the_processors_exception_in_the_test(
    app_name: str, store_url: str
) -> None:
    app = orders_app(app_name, partitions=1)
    orders = app.streams["orders"]

    @app.processor(orders, exception_policy=ExceptionPolicy.HALT)
    async def strict(events: Events) -> None:
        async for order in events.records():
            if order.id == 2:
                raise ValueError(f"bad order {order.id}")

    async with run(app, store=store_url) as t:
        await orders.send(*batch(4, users=1))
        with pytest.raises(WorkerHalted) as caught:
            await t.processed()
        assert isinstance(caught.value.__cause__, ValueError)
        assert str(caught.value.__cause__) == "bad order 2"
        [failure] = t.failures
        assert (failure.processor, failure.partition) == ("strict", 0)
        # The failed event was not acknowledged: the next worker gets it again.
        assert [o.id for o in await t.acknowledged("strict")] == [0, 1]


async def test_a_halted_event_is_delivered_again_to_the_next_worker(
    app_name: str, store_url: str
) -> None:
    app = orders_app(app_name, partitions=1)
    orders = app.streams["orders"]
    seen: list[int] = []
    broken = {"on": True}

    @app.processor(orders, exception_policy=ExceptionPolicy.HALT)
    async def strict(events: Events) -> None:
        async for order in events.records():
            seen.append(order.id)
            if order.id == 1 and broken["on"]:
                raise ValueError("down")

    async with run(app, store=store_url) as t:
        await orders.send(*batch(3, users=1))
        with pytest.raises(WorkerHalted):
            await t.processed()
        broken["on"] = False
        await t.start_worker()
        await t.processed()
        assert seen == [0, 1, 1, 2]
        assert [o.id for o in await t.acknowledged("strict")] == [0, 1, 2]


async def test_ignore_acknowledges_the_failed_event_and_goes_on(
    app_name: str, store_url: str
) -> None:
    app = orders_app(app_name, partitions=1)
    orders = app.streams["orders"]
    seen: list[int] = []

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE)
    async def lenient(events: Events) -> None:
        async for order in events.records():
            if order.id == 1:
                raise ValueError("bad")
            seen.append(order.id)

    async with run(app, store=store_url) as t:
        await orders.send(*batch(3, users=1))
        await t.processed()
        assert seen == [0, 2]
        assert [o.id for o in await t.acknowledged("lenient")] == [0, 1, 2]
        assert [type(f.exception) for f in t.failures] == [ValueError]


async def test_retry_tries_again_in_place(app_name: str, store_url: str) -> None:
    app = orders_app(app_name, partitions=1)
    orders = app.streams["orders"]
    seen: list[int] = []

    @app.processor(orders, exception_policy=ExceptionPolicy.RETRY, retries=3, retry_backoff=0.01)
    async def flaky(events: Events) -> None:
        async for order in events.records():
            seen.append(order.id)
            if order.id == 1 and seen.count(1) < 3:
                raise ConnectionError("try again")

    async with run(app, store=store_url) as t:
        await orders.send(*batch(3, users=1))
        await t.processed()
        assert seen == [0, 1, 1, 1, 2]
        assert len(t.failures) == 2


async def test_quarantine_leaves_the_partition_and_the_rest_goes_on(
    app_name: str, store_url: str
) -> None:
    app = orders_app(app_name, partitions=2)
    orders = app.streams["orders"]
    poisoned = Order(id=0, user="poison")
    fine = [
        o
        for o in batch(20, users=10)
        if orders.partition_number(o) != orders.partition_number(poisoned)
    ]
    seen: list[int] = []

    @app.processor(orders, exception_policy=ExceptionPolicy.QUARANTINE)
    async def careful(events: Events) -> None:
        async for order in events.records():
            if order.user == "poison":
                raise ValueError("poison")
            seen.append(order.id)

    async with run(app, store=store_url) as t:
        await orders.send(poisoned, *fine)
        await t.processed()  # the quarantined partition is not waited for
        assert sorted(seen) == sorted(o.id for o in fine)
        assert [f.partition for f in t.failures] == [orders.partition_number(poisoned)]
        assert len(t.workers) == 1  # still running


async def test_dead_letter_middleware_forwards_failed_events(app_name: str, store_url: str) -> None:
    app = orders_app(app_name, partitions=1)
    orders = app.streams["orders"]
    dead = DeadLetterMiddleware(orders)

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE, middleware=[dead])
    async def lenient(events: Events) -> None:
        async for order in events.records():
            if order.id % 2:
                raise ValueError(f"odd {order.id}")

    async with run(app, store=store_url) as t:
        await orders.send(*batch(4, users=1))
        await t.processed()
        letters = await t.events(dead.sink)
        assert all(isinstance(x, Dead) for x in letters)
        assert [x.error for x in letters] == ["ValueError: odd 1", "ValueError: odd 3"]


def test_a_synchronous_test_runs_the_app_too(app_name: str, store_url: str) -> None:
    app = orders_app(app_name)
    orders = app.streams["orders"]
    seen: list[int] = []

    @app.processor(orders)
    async def record(events: Events) -> None:
        async for order in events.records():
            seen.append(order.id)

    @app.job
    def double(n: int) -> int:
        return 2 * n

    with run_sync(app, store=store_url) as t:
        t.send(orders, *batch(10))
        t.processed()
        assert sorted(seen) == list(range(10))
        assert sorted(o.id for o in t.acknowledged("record")) == list(range(10))
        assert double.delay_sync(21).get(timeout=t.run.wait) == 42
