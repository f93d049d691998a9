"""DeadLetterMiddleware: failed events (processing or decoding) land in ``dead.{name}``."""

from __future__ import annotations

import logging
from datetime import datetime

import pytest
import redis

from runnel import Event, ExceptionPolicy, Record
from runnel.middleware import Dead, DeadLetterMiddleware
from tests.support.apps import Running, all_pending, make_app, pending_ids


class Order(Record):
    order_id: int
    amount: float
    lines: list[str] = []


class Click(Record, primitive=True):
    user: str
    n: int
    bad: bool


class Boom(Exception):
    pass


async def test_failed_and_undecodable_events_of_a_serialized_stream(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="order_id", partition_count=2)
    dlq = DeadLetterMiddleware(source=orders)
    assert dlq.sink.name == "dead.orders"
    assert dlq.sink.partition_count == 1
    processed: list[int] = []
    dead: list[Record] = []

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE, middleware=[dlq])
    async def proc(events):
        async for order in events.records():
            if order.amount < 0:
                raise Boom(order.order_id)
            processed.append(order.order_id)

    @app.processor(dlq.sink)
    async def undertaker(events):
        async for record in events.records():
            dead.append(record)

    ids = await orders.send(*[Order(order_id=i, amount=-1 if i in (2, 5) else i) for i in range(8)])
    garbage_key = orders.partitions[1].key
    garbage_id = redis_client.xadd(garbage_key, {b"data": b"not json"})
    await orders.send(*[Order(order_id=i, amount=i) for i in range(8, 12)])
    async with Running(app) as running:
        await running.until(lambda: len(processed) == 10 and len(dead) == 3, "all events")
        assert not running.done, "a decode failure must not crash the worker"
        assert await running.stop() == 0

    assert sorted(processed) == [0, 1, 3, 4, 6, 7, 8, 9, 10, 11]
    # Ids are unique per partition only, so entries are told apart by (partition, id).
    raw = {
        (p.key, xid): fields[b"data"]
        for p in orders.partitions
        for xid, fields in redis_client.xrange(p.key)
    }
    by_id = {(d.partition, d.xid.encode()): d for d in dead}
    where = [
        (orders.partition_for(Order(order_id=2, amount=0)).key, ids[2]),
        (orders.partition_for(Order(order_id=5, amount=0)).key, ids[5]),
        (garbage_key, garbage_id),
    ]
    assert set(by_id) == set(where)
    for at in where:
        d = by_id[at]
        assert isinstance(d, Dead)
        assert d.data == raw[at]
        assert datetime.fromisoformat(d.failed_at).tzinfo is not None
    assert by_id[where[2]].data == b"not json"
    assert Order.model_validate_json(by_id[where[0]].data) == Order(order_id=2, amount=-1)
    assert Order.model_validate_json(by_id[where[1]].data) == Order(order_id=5, amount=-1)

    # The failures were acknowledged on the source; the dead stream was consumed.
    assert all_pending(redis_client, orders, "proc") == {p.key: [] for p in orders.partitions}
    assert pending_ids(redis_client, dlq.sink.partitions[0].key, "undertaker") == []


async def test_primitive_source_keeps_the_record_as_is(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    clicks = app.stream("clicks", record=Click, partition_by="user", partition_count=3)
    dlq = DeadLetterMiddleware(source=clicks)
    assert dlq.sink.name == "dead.clicks"
    assert dlq.sink.record is Click
    processed: list[int] = []
    dead: list[Event] = []

    @app.processor(clicks, exception_policy=ExceptionPolicy.IGNORE, middleware=[dlq])
    async def proc(events):
        async for click in events.records():
            if click.bad:
                raise Boom(click.n)
            processed.append(click.n)

    @app.processor(dlq.sink)
    async def undertaker(events):
        async for event in events:
            dead.append(event)

    sent = [Click(user=f"u{i % 4}", n=i, bad=i % 3 == 0) for i in range(9)]
    await clicks.send(*sent)
    undecodable = {b"user": b"u1", b"n": b"not a number", b"bad": b"0"}
    redis_client.xadd(clicks.partition_for(sent[1]).key, undecodable)
    async with Running(app) as running:
        await running.until(lambda: len(processed) == 6 and len(dead) == 4, "all events")
        assert not running.done
        assert await running.stop() == 0

    assert sorted(processed) == [1, 2, 4, 5, 7, 8]
    fields = [e.data for e in dead]
    assert undecodable in fields
    decoded = sorted((e.record for e in dead if e.data != undecodable), key=lambda c: c.n)
    assert decoded == [c for c in sent if c.bad]
    for entry_fields in fields:
        assert b"data" not in entry_fields
        assert set(entry_fields) == {b"user", b"n", b"bad"}
    assert all_pending(redis_client, clicks, "proc") == {p.key: [] for p in clicks.partitions}


@pytest.mark.parametrize("policy", [ExceptionPolicy.HALT, ExceptionPolicy.QUARANTINE])
async def test_decode_failure_goes_through_the_policy(
    redis_url: str, app_name: str, redis_client: redis.Redis, policy: ExceptionPolicy
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="order_id", partition_count=1)
    processed: list[int] = []

    @app.processor(orders, exception_policy=policy)
    async def proc(events):
        async for order in events.records():
            processed.append(order.order_id)

    await orders.send(Order(order_id=1, amount=1))
    garbage_id = redis_client.xadd(orders.partitions[0].key, {b"data": b"not json"})
    await orders.send(Order(order_id=2, amount=2))
    async with Running(app) as running:
        await running.until(lambda: processed == [1], "the first event")
        if policy is ExceptionPolicy.HALT:
            assert await running.exit_code() == 1
        else:
            await running.until(
                lambda: any(c.poisoned for c in running.consumers()), "the quarantine"
            )
            assert not running.done
            assert await running.stop() == 0
    assert processed == [1]
    assert garbage_id in pending_ids(redis_client, orders.partitions[0].key, "proc")


async def test_an_event_whose_forwarding_failed_is_tried_again(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="order_id", partition_count=1)
    dlq = DeadLetterMiddleware(source=orders)
    forward = dlq.forward
    outages = ["down"]

    async def flaky_forward(events: list[Event], error: str = "") -> None:
        if outages:
            raise ConnectionError(outages.pop())
        await forward(events, error)

    dlq.forward = flaky_forward  # type: ignore[method-assign]
    attempts: list[int] = []
    dead: list[Record] = []

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE, middleware=[dlq])
    async def proc(events):
        async for order in events.records():
            attempts.append(order.order_id)
            if order.amount < 0:
                raise Boom(order.order_id)

    @app.processor(dlq.sink)
    async def undertaker(events):
        async for record in events.records():
            dead.append(record)

    ids = await orders.send(*[Order(order_id=i, amount=-1 if i == 1 else i) for i in range(4)])
    async with Running(app) as running:
        await running.until(lambda: 3 in attempts and dead, "all events and the dead one")
        assert await running.stop() == 0
    assert attempts == [0, 1, 1, 2, 3], "not counted as processed: tried again, in order"
    assert [(d.xid, d.data) for d in dead] == [
        (ids[1].decode(), Order(order_id=1, amount=-1).model_dump_json().encode())
    ]
    assert pending_ids(redis_client, orders.partitions[0].key, "proc") == []


async def test_a_failed_batch_is_forwarded_whole(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="order_id", partition_count=1)
    dlq = DeadLetterMiddleware(source=orders)
    batches: list[list[int]] = []
    dead: list[Record] = []

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE, middleware=[dlq])
    async def proc(events):
        async for batch in events.take(3, within=0.05).records():
            batches.append([o.order_id for o in batch])
            if any(o.amount < 0 for o in batch):
                raise Boom(batch)

    @app.processor(dlq.sink)
    async def undertaker(events):
        async for record in events.records():
            dead.append(record)

    ids = await orders.send(*[Order(order_id=i, amount=-1 if i == 4 else i) for i in range(9)])
    async with Running(app) as running:
        await running.until(lambda: len(batches) == 3 and len(dead) == 3, "all batches")
        assert await running.stop() == 0
    assert batches == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert [d.xid for d in dead] == [x.decode() for x in ids[3:6]]
    assert pending_ids(redis_client, orders.partitions[0].key, "proc") == []


@pytest.mark.parametrize(
    "options,warned",
    [
        ({"exception_policy": "ignore"}, None),
        ({"exception_policy": "retry", "fallback": "ignore"}, None),
        ({"exception_policy": "retry", "fallback": "quarantine"}, "RETRY with fallback QUARANTINE"),
        ({"exception_policy": "halt"}, "HALT"),
    ],
    ids=["ignore", "retry-then-ignore", "retry-then-quarantine", "halt"],
)
def test_a_policy_that_never_forwards_is_warned_about_and_no_other(
    redis_url: str, app_name: str, caplog: pytest.LogCaptureFixture, options: dict, warned: str
) -> None:
    """The warning names the policy when nothing would ever be forwarded, and only then:
    RETRY falling back to IGNORE forwards once the retries run out (see test_retry.py)."""
    caplog.set_level(logging.WARNING, logger="runnel.dead_letter")
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="order_id", partition_count=1)

    @app.processor(orders, middleware=[DeadLetterMiddleware(orders)], **options)
    async def proc(events):
        async for _ in events.records():
            pass

    said = [r.getMessage() for r in caplog.records if r.name == "runnel.dead_letter"]
    if warned is None:
        assert said == []
    else:
        assert said == [
            "DeadLetterMiddleware on processor proc forwards nothing: it forwards the events "
            "given up under ExceptionPolicy.IGNORE (or RETRY with fallback IGNORE), and the "
            f"policy is {warned}"
        ]


async def test_a_letter_names_its_partition_the_same_way_on_every_store(
    store_url: str, app_name: str
) -> None:
    """``partition`` is runnel 0.1's name, ``__strm:{app}.{stream}.{n}``, on memory:// as
    on Redis; ``runnel dead`` finds the partition from it (and from the store's own key,
    which letters written on memory:// before carried)."""
    from runnel.admin.dead_letters import Selection, stream_dead_letters
    from runnel.testing import run

    app = make_app(app_name, "memory://")
    orders = app.stream("orders", record=Order, partition_by="order_id", partition_count=4)
    dlq = DeadLetterMiddleware(source=orders)

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE, middleware=[dlq])
    async def proc(events):
        async for _ in events.records():
            raise Boom("no")

    async with run(app, store=store_url) as t:
        await orders.send(Order(order_id=7, amount=1))
        await t.processed()
        (dead,) = await t.events(dlq.sink)
        number = orders.partition_for(Order(order_id=7, amount=1)).number
        assert isinstance(dead, Dead)
        assert dead.partition == f"__strm:{app_name}.orders.{number}"
        await dlq.sink.send(dead.model_copy(update={"partition": orders.partitions[number].key}))
        letters = await stream_dead_letters(Selection(orders, None, None, None, None))
        assert [x.partition.number if x.partition else None for x in letters] == [number] * 2
