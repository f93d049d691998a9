"""Undecodable Avro and compressed entries go through the exception policy; the worker lives.

The JSON cases are covered in test_dead_letter.py; here the bad entries are written with
redis-py straight into a partition: bytes that are not the format, a valid frame around
bytes that are not the format, Avro with a fingerprint nobody stored, truncated Avro.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis

from runnel import ExceptionPolicy, Record, Stream
from runnel.exceptions import DecodeError
from runnel.middleware import Dead, DeadLetterMiddleware
from tests.support.apps import Running, all_pending, keys_by_partition, make_app, pending_ids


class Order(Record):
    key: str
    n: int
    item: str = "thing"


def bad_payloads(stream: Stream) -> dict[str, bytes]:
    """Entries this stream cannot decode, as stored bytes, by what is wrong with them."""
    serializer = stream.serializer
    compressor = serializer.compressor

    def stored(data: bytes) -> bytes:
        return data if compressor is None else compressor.compress(data)

    bad = {"garbage": b"\x00\x01 not any format \xff"}
    if compressor is not None:
        bad["framed-garbage"] = compressor.compress(b"\x00\x01 not the format inside \xff")
    if serializer.name == "avro":
        good = serializer.dumps(Order(key="x", n=0).model_dump(mode="python"))
        bad["unknown-fingerprint"] = stored(b"\xc3\x01" + b"\xee" * 8 + good[10:])
        bad["truncated"] = stored(good[:11])
        bad["marker-only"] = stored(b"\xc3\x01")
    return bad


@pytest.mark.parametrize("spec", ["avro", "avro+gzip", "avro+zstd", "msgpack+lz4", "json+zstd"])
async def test_undecodable_entries_go_to_the_dead_letter_stream(
    redis_url: str, app_name: str, redis_client: redis.Redis, spec: str
) -> None:
    """IGNORE + DeadLetterMiddleware: raw bytes kept in ``dead.orders``, later events done."""
    app = make_app(app_name, redis_url)
    orders = app.stream(
        "orders", record=Order, partition_by="key", partition_count=2, serializer=spec
    )
    dlq = DeadLetterMiddleware(source=orders)
    processed: list[Order] = []
    dead: list[Dead] = []

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE, middleware=[dlq])
    async def proc(events):
        async for order in events.records():
            processed.append(order)

    @app.processor(dlq.sink)
    async def undertaker(events):
        async for record in events.records():
            dead.append(record)

    keys = keys_by_partition(orders, lambda k: Order(key=k, n=0), 2)
    before = [Order(key=k, n=i) for i in range(3) for k in keys]
    after = [Order(key=k, n=i) for i in range(3, 6) for k in keys]
    await orders.send(*before)
    written: dict[tuple[str, bytes], bytes] = {}
    for i, data in enumerate(bad_payloads(orders).values()):
        partition = orders.partitions[i % 2]
        written[(partition.key, redis_client.xadd(partition.key, {b"data": data}))] = data
    await orders.send(*after)

    async with Running(app) as running:
        await running.until(
            lambda: len(processed) == len(before) + len(after) and len(dead) == len(written),
            "every good event and every bad one",
        )
        assert not running.done, "a decode failure must not stop the worker"
        assert await running.stop() == 0

    for key in keys:
        assert [o for o in processed if o.key == key] == [
            o for o in before + after if o.key == key
        ], key
    assert {(d.partition, d.xid.encode()): d.data for d in dead} == written
    assert all_pending(redis_client, orders, "proc") == {p.key: [] for p in orders.partitions}
    assert pending_ids(redis_client, dlq.sink.partitions[0].key, "undertaker") == []


async def test_a_bad_avro_entry_quarantines_only_its_partition(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream(
        "orders", record=Order, partition_by="key", partition_count=4, serializer="avro+zstd"
    )
    bad, *good = keys_by_partition(orders, lambda k: Order(key=k, n=0), 4)
    seen: dict[str, list[int]] = {k: [] for k in (bad, *good)}

    @app.processor(orders, exception_policy=ExceptionPolicy.QUARANTINE)
    async def proc(events):
        async for order in events.records():
            seen[order.key].append(order.n)

    await orders.send(*[Order(key=k, n=i) for i in range(3) for k in (bad, *good)])
    bad_key = orders.partition_for(Order(key=bad, n=0)).key
    bad_id = redis_client.xadd(bad_key, {b"data": bad_payloads(orders)["unknown-fingerprint"]})
    await orders.send(Order(key=bad, n=3))

    async with Running(app) as running:
        await running.until(lambda: any(c.poisoned for c in running.consumers()), "quarantine")
        for round_ in range(3):
            await orders.send(*[Order(key=k, n=10 + round_) for k in (*good, bad)])
            await running.until(
                lambda r=round_: all(len(seen[k]) == 4 + r for k in good), "more good events"
            )
        assert not running.done
        assert await running.stop() == 0

    assert seen[bad] == [0, 1, 2], "nothing after the bad entry in its partition"
    for key in good:
        assert seen[key] == [0, 1, 2, 10, 11, 12], key
    assert pending_ids(redis_client, bad_key, "proc")[0] == bad_id
    for key in good:
        assert (
            pending_ids(redis_client, orders.partition_for(Order(key=key, n=0)).key, "proc") == []
        )


@pytest.mark.parametrize("what", ["garbage", "unknown-fingerprint"])
async def test_a_bad_compressed_avro_entry_halts_the_worker(
    redis_url: str, app_name: str, redis_client: redis.Redis, what: str
) -> None:
    """HALT: the worker stops on its own, exit code 1, the bad entry left pending."""
    app = make_app(app_name, redis_url)
    orders = app.stream(
        "orders", record=Order, partition_by="key", partition_count=1, serializer="avro+gzip"
    )
    processed: list[int] = []
    failures: list[BaseException] = []

    @app.processor(orders, exception_policy=ExceptionPolicy.HALT)
    async def proc(events):
        async for event in events:
            try:
                order = event.record
            except DecodeError as exc:
                failures.append(exc)
                raise
            processed.append(order.n)

    await orders.send(Order(key="k", n=1), Order(key="k", n=2))
    bad_id = redis_client.xadd(orders.partitions[0].key, {b"data": bad_payloads(orders)[what]})
    await orders.send(Order(key="k", n=3))
    async with Running(app) as running:
        assert await running.exit_code() == 1
    assert processed == [1, 2]
    assert len(failures) == 1
    if what == "unknown-fingerprint":
        assert "ee" * 8 in str(failures[0])
    # Fetched-ahead events may be pending too; the bad one is first, not acknowledged.
    assert pending_ids(redis_client, orders.partitions[0].key, "proc")[0] == bad_id


async def test_unchecked_reader_meets_unreadable_data_under_ignore(
    redis_url: str, app_name: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """With compatibility "none" nothing is checked: each unreadable event fails alone."""
    caplog.set_level(logging.ERROR, logger="runnel")

    class Text:
        class Order(Record):
            key: str
            n: str

    class Number:
        class Order(Record):
            key: str
            n: int

    def declare(record: type[Record], seen: list[Any] | None = None):
        app = make_app(app_name, redis_url)
        from runnel_avro import AvroSerializer

        stream = app.stream(
            "orders",
            record=record,
            partition_by="key",
            partition_count=1,
            serializer=AvroSerializer(compatibility="none"),
        )
        if seen is not None:

            @app.processor(stream, name="proc", exception_policy=ExceptionPolicy.IGNORE)
            async def proc(events):
                async for order in events.records():
                    seen.append(order.n)

        return app, stream

    _, text = declare(Text.Order)
    await text.send(*[Text.Order(key="k", n=f"t{i}") for i in range(3)])
    seen: list[int] = []
    app, number = declare(Number.Order, seen)
    async with Running(app) as running:
        await number.send(*[Number.Order(key="k", n=i) for i in range(3)])
        await text.send(Text.Order(key="k", n="late"))
        await number.send(Number.Order(key="k", n=99))
        await running.until(lambda: 99 in seen, "the last event")
        assert not running.done
        assert await running.stop() == 0
    assert seen == [0, 1, 2, 99]
    failed = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], DecodeError)]
    assert len(failed) == 4
    assert pending_ids(redis_client, number.partitions[0].key, "proc") == []
