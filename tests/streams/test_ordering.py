"""Partition order, exactly-once processing without failures, and record round trips."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone

import redis

from runnel import Record
from runnel.hashing import default_hasher
from tests.support.apps import Running, all_pending, make_app


class Ping(Record):
    key: str
    n: int


class Click(Record, primitive=True):
    user: str
    n: int
    score: float
    ok: bool
    raw: bytes


class Item(Record):
    id: int
    name: str
    tags: list[str] = []


class Order(Record):
    order_id: int
    created_at: datetime
    items: list[Item]
    note: str | None = None


async def test_order_per_partition_and_exactly_once(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=4)
    keys = [f"user{i}" for i in range(11)]
    total = 600
    seen: list[tuple[int, bytes, str, int]] = []

    @app.processor(pings)
    async def collect(events):
        async for event in events:
            ping = event.record
            seen.append((event.partition.number, event.xid, ping.key, ping.n))
            if len(seen) % 50 == 0:
                await asyncio.sleep(0)  # let other partitions interleave

    # Some events are there before the worker starts, more arrive while it runs.
    first = [Ping(key=keys[i % len(keys)], n=i) for i in range(total // 2)]
    await pings.send(*first)
    async with Running(app) as running:
        await running.until(lambda: len(seen) >= total // 2, "the backlog was processed")
        rest = [Ping(key=keys[i % len(keys)], n=i) for i in range(total // 2, total)]
        for chunk in range(0, len(rest), 60):
            await pings.send(*rest[chunk : chunk + 60])
        await running.until(lambda: len(seen) >= total, "all events were processed")
        assert await running.stop() == 0

    # Exactly once: every event processed, none twice.
    counts = Counter(n for *_, n in seen)
    assert sorted(counts) == list(range(total))
    assert set(counts.values()) == {1}

    # Routing: hasher(key) % partition_count, with the default md5 hasher.
    for number, _, key, _ in seen:
        assert number == default_hasher(key) % 4
    assert len({number for number, *_ in seen}) > 1, "keys should spread over partitions"

    # Order: per key in send order, per partition in stream (id) order.
    by_key: dict[str, list[int]] = {}
    by_partition: dict[int, list[tuple[int, ...]]] = {}
    for number, xid, key, n in seen:
        by_key.setdefault(key, []).append(n)
        major, minor = xid.split(b"-")
        by_partition.setdefault(number, []).append((int(major), int(minor)))
    for key, ns in by_key.items():
        assert ns == sorted(ns), key
    for number, xids in by_partition.items():
        assert xids == sorted(xids), number

    # Nothing left pending after a graceful stop.
    assert all_pending(redis_client, pings, "collect") == {p.key: [] for p in pings.partitions}


async def test_primitive_records_are_native_fields(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    clicks = app.stream("clicks", record=Click, partition_by="user", partition_count=2)
    sent = [
        Click(user="ann", n=1, score=1.5, ok=True, raw=b"\x00\xff"),
        Click(user="bob", n=-7, score=0.1, ok=False, raw=b""),
        Click(user="ann", n=2**40, score=-3.0, ok=True, raw=b"bytes"),
        Click(user="c\u00e9line", n=0, score=1e-9, ok=False, raw=b"\n"),
    ]
    await clicks.send(*sent)

    entries = []
    for p in clicks.partitions:
        entries.extend(redis_client.xrange(p.key))
    assert len(entries) == len(sent)
    for _, fields in entries:
        assert set(fields) == {b"user", b"n", b"score", b"ok", b"raw"}
        assert b"data" not in fields
    raw = {fields[b"n"]: fields for _, fields in entries}
    assert raw[b"1"][b"user"] == b"ann"
    assert raw[b"1"][b"ok"] == b"True"  # as runnel 0.1 stored bools
    assert raw[b"1"][b"raw"] == b"\x00\xff"
    assert raw[b"-7"][b"ok"] == b"False"
    assert raw[b"0"][b"user"] == "c\u00e9line".encode()

    got: list[Click] = []

    @app.processor(clicks)
    async def collect(events):
        async for click in events.records():
            got.append(click)

    async with Running(app) as running:
        await running.until(lambda: len(got) == len(sent), "all clicks were processed")
    assert sorted(got, key=lambda c: c.n) == sorted(sent, key=lambda c: c.n)
    assert all(isinstance(c, Click) for c in got)


async def test_nested_records_round_trip(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="order_id", partition_count=3)
    base = datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC)
    sent = [
        Order(
            order_id=i,
            created_at=base + timedelta(days=i),
            items=[Item(id=j, name=f"item {j}", tags=["a"] * j) for j in range(i % 4)],
            note=None if i % 2 else f"note {i}",
        )
        for i in range(20)
    ]
    sent.append(
        Order(
            order_id=99,
            created_at=datetime(2021, 6, 1, 8, 0, tzinfo=timezone(timedelta(hours=-5))),
            items=[Item(id=1, name="\u00fcnicode \u2603", tags=[])],
        )
    )
    await orders.send(*sent)
    for p in orders.partitions:
        for _, fields in redis_client.xrange(p.key):
            assert set(fields) == {b"data"}

    got: dict[int, Order] = {}

    @app.processor(orders)
    async def collect(events):
        async for order in events.records():
            got[order.order_id] = order

    async with Running(app) as running:
        await running.until(lambda: len(got) == len(sent), "all orders were processed")
    for order in sent:
        assert got[order.order_id] == order
        assert got[order.order_id].created_at.utcoffset() == order.created_at.utcoffset()
        assert all(isinstance(item, Item) for item in got[order.order_id].items)


async def test_processors_of_one_stream_each_get_every_event(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    seen: dict[str, list[int]] = {"one": [], "two": []}

    @app.processor(pings, name="one")
    async def one(events):
        async for ping in events.records():
            seen["one"].append(ping.n)

    @app.processor(pings, name="two")
    async def two(events):
        async for batch in events.take(4, within=0.01).records():
            seen["two"].extend(p.n for p in batch)

    await pings.send(*[Ping(key=f"k{i % 3}", n=i) for i in range(50)])
    async with Running(app) as running:
        await running.until(lambda: all(len(v) == 50 for v in seen.values()), "both")
        assert await running.stop() == 0
    assert sorted(seen["one"]) == sorted(seen["two"]) == list(range(50))
    for group in ("one", "two"):
        assert all_pending(redis_client, pings, group) == {p.key: [] for p in pings.partitions}
