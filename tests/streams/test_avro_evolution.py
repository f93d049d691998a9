"""Avro schema evolution between versions of one record, on one stream, with real Redis.

Each ``Vn`` namespace holds a version of the same ``Order`` record (the Avro name is the
class name), declared by its own App object with the same app and stream names, as two
deployments of one service would.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import logging
import uuid
from typing import Annotated, Any

import pytest
import redis
from pydantic import Field

from runnel import App, ExceptionPolicy, Record, Stream
from runnel.exceptions import SchemaIncompatible
from runnel_avro import AvroSerializer
from tests.support.apps import Running, make_app


class V1:
    class Order(Record):
        id: int
        item: str
        qty: int
        note: str = ""


class V2:
    """V1 with ``note`` removed, ``qty`` widened to float and ``gift`` added with a default."""

    class Order(Record):
        id: int
        item: str
        qty: float
        gift: bool = False


class V2Added:
    """V1 plus a field with a default: V1 readers can read it, V2Added reads V1."""

    class Order(Record):
        id: int
        item: str
        qty: int
        note: str = ""
        gift: bool = False


class V3Required:
    """V1 plus a required field: cannot read what V1 wrote."""

    class Order(Record):
        id: int
        item: str
        qty: int
        note: str = ""
        priority: int


def declare(
    app_name: str,
    redis_url: str,
    record: type[Record],
    seen: list[Any] | None = None,
    serializer: Any = "avro",
    policy: ExceptionPolicy = ExceptionPolicy.HALT,
) -> tuple[App, Stream]:
    """An app with the ``orders`` stream of ``record``; a processor if ``seen`` is given."""
    app = make_app(app_name, redis_url)
    orders = app.stream(
        "orders", record=record, partition_by="id", partition_count=2, serializer=serializer
    )
    if seen is not None:

        @app.processor(orders, name="proc", exception_policy=policy)
        async def proc(events):
            async for order in events.records():
                seen.append(order)

    return app, orders


def schema_hash(client: redis.Redis, app_name: str) -> dict[bytes, bytes]:
    return client.hgetall(f"__schm:{app_name}.orders")


def lengths(client: redis.Redis, stream: Stream) -> list[int]:
    return [client.xlen(p.key) for p in stream.partitions]


def fingerprints_in(client: redis.Redis, stream: Stream) -> list[str]:
    """The writer-schema fingerprint of each stored entry, in partition order."""
    return [
        fields[b"data"][2:10].hex() for p in stream.partitions for _, fields in client.xrange(p.key)
    ]


def by_id(records: list[Any]) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for r in records:
        out.setdefault(r.id, []).append(r)
    return out


# --- Reading across versions -----------------------------------------------------------


async def test_v2_processor_reads_what_v1_wrote(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """Added field -> its default; removed field -> ignored; int -> float widened."""
    _, old = declare(app_name, redis_url, V1.Order)
    await old.send(*[V1.Order(id=i % 3, item=f"i{i}", qty=i, note="old") for i in range(9)])

    seen: list[V2.Order] = []
    app, new = declare(app_name, redis_url, V2.Order, seen)
    async with Running(app) as running:
        await running.until(lambda: len(seen) == 9, "the v1 events")
        await new.send(
            *[V2.Order(id=i % 3, item=f"j{i}", qty=i + 0.5, gift=True) for i in range(3)]
        )
        await running.until(lambda: len(seen) == 12, "the v2 events")
        assert await running.stop() == 0

    assert all(isinstance(o, V2.Order) for o in seen)
    for key, orders in by_id(seen).items():
        expected = [V2.Order(id=key, item=f"i{i}", qty=float(i)) for i in range(key, 9, 3)]
        expected.append(V2.Order(id=key, item=f"j{key}", qty=key + 0.5, gift=True))
        assert orders == expected, key
    assert all(type(o.qty) is float for o in seen)
    assert not any(hasattr(o, "note") for o in seen)
    stored = schema_hash(redis_client, app_name)
    assert set(stored) == {old.serializer.fingerprint.encode(), new.serializer.fingerprint.encode()}


async def test_v1_processor_loads_a_schema_stored_after_it_started(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """A running consumer meets an unknown fingerprint, loads it, and decodes the events."""
    seen: list[V1.Order] = []
    app, old = declare(app_name, redis_url, V1.Order, seen)
    await old.send(V1.Order(id=1, item="before", qty=1))
    _, new = declare(app_name, redis_url, V2Added.Order)
    new_fp = new.serializer.fingerprint
    async with Running(app) as running:
        await running.until(lambda: len(seen) == 1, "the first v1 event")
        assert new_fp not in old.serializer.stored
        assert new_fp.encode() not in schema_hash(redis_client, app_name)

        await new.send(
            *[V2Added.Order(id=i % 2, item=f"v2-{i}", qty=i, gift=True) for i in range(4)]
        )
        await old.send(V1.Order(id=0, item="after", qty=9))
        await running.until(lambda: len(seen) == 6, "the v2 events and the next v1 one")
        assert not running.done
        assert await running.stop() == 0

    assert new_fp in old.serializer.stored, "the new writer schema was loaded by the reader"
    assert fingerprints_in(redis_client, old).count(new_fp) == 4
    assert all(type(o) is V1.Order for o in seen)
    assert by_id(seen) == {
        1: [
            V1.Order(id=1, item="before", qty=1),
            V1.Order(id=1, item="v2-1", qty=1),
            V1.Order(id=1, item="v2-3", qty=3),
        ],
        0: [
            V1.Order(id=0, item="v2-0", qty=0),
            V1.Order(id=0, item="v2-2", qty=2),
            V1.Order(id=0, item="after", qty=9),
        ],
    }


# --- Refusing incompatible schemas -----------------------------------------------------


async def test_incompatible_producer_is_refused_and_writes_nothing(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    _, old = declare(app_name, redis_url, V1.Order)
    await old.send(*[V1.Order(id=i, item="x", qty=i) for i in range(4)])
    schemas_before = schema_hash(redis_client, app_name)
    lengths_before = lengths(redis_client, old)

    _, new = declare(app_name, redis_url, V3Required.Order)
    for _attempt in range(2):  # refused every time, not only on the first send
        with pytest.raises(SchemaIncompatible) as caught:
            await new.send(V3Required.Order(id=1, item="y", qty=1, priority=5))
        message = str(caught.value)
        assert f"{app_name}.orders" in message
        assert "Order.priority" in message
        assert old.serializer.fingerprint in message
    assert schema_hash(redis_client, app_name) == schemas_before
    assert lengths(redis_client, old) == lengths_before

    # The old producer is unaffected.
    await old.send(V1.Order(id=9, item="z", qty=9))
    assert sum(lengths(redis_client, old)) == sum(lengths_before) + 1


async def test_check_is_transitive_over_every_stored_schema(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """V3 can read V2's data but not V1's: refused, naming V1's schema and the field."""

    class A:
        class Order(Record):
            id: int
            code: str

    class B:
        class Order(Record):
            id: int

    class C:
        class Order(Record):
            id: int
            code: int = 0

    streams = [declare(app_name, redis_url, v.Order)[1] for v in (A, B, C)]
    await streams[0].send(A.Order(id=1, code="abc"))
    await streams[1].send(B.Order(id=2))
    with pytest.raises(SchemaIncompatible) as caught:
        await streams[2].send(C.Order(id=3, code=3))
    message = str(caught.value)
    assert "Order.code" in message
    assert streams[0].serializer.fingerprint in message
    assert len(schema_hash(redis_client, app_name)) == 2


CHANGES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # name: (v1 fields, v2 fields) as {field: (annotation, default or ...)}
    "add-with-default": ({"a": (int, ...)}, {"a": (int, ...), "b": (int, 0)}),
    "add-required": ({"a": (int, ...)}, {"a": (int, ...), "b": (int, ...)}),
    "remove-required": ({"a": (int, ...), "b": (int, ...)}, {"a": (int, ...)}),
    "remove-with-default": ({"a": (int, ...), "b": (int, 0)}, {"a": (int, ...)}),
    "widen-int-to-float": ({"a": (int, ...)}, {"a": (float, ...)}),
    "str-to-int": ({"a": (str, ...)}, {"a": (int, ...)}),
}

ACCEPTED = {
    "backward": {
        "add-with-default",
        "remove-required",
        "remove-with-default",
        "widen-int-to-float",
    },
    "forward": {"add-with-default", "add-required", "remove-with-default"},
    "full": {"add-with-default", "remove-with-default"},
    "none": set(CHANGES),
}


def order_class(fields: dict[str, Any]) -> type[Record]:
    from pydantic import create_model

    return create_model("Order", __base__=Record, id=(int, ...), **fields)


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("mode", ACCEPTED)
async def test_compatibility_modes(
    redis_url: str, app_name: str, redis_client: redis.Redis, mode: str, change: str
) -> None:
    """Which changes each mode lets a new producer make; a refusal names field ``b``/``a``."""
    v1_fields, v2_fields = CHANGES[change]
    v1, v2 = order_class(v1_fields), order_class(v2_fields)
    _, old = declare(app_name, redis_url, v1, serializer=AvroSerializer(compatibility=mode))
    _, new = declare(app_name, redis_url, v2, serializer=AvroSerializer(compatibility=mode))
    sample = {"a": 1, "b": 2}
    await old.send(v1(id=1, **{k: ("1" if v[0] is str else 1) for k, v in v1_fields.items()}))
    record = v2(id=2, **{k: sample[k] for k in v2_fields})
    if change in ACCEPTED[mode]:
        await new.send(record)
        assert len(schema_hash(redis_client, app_name)) == 2
        assert sum(lengths(redis_client, old)) == 2
    else:
        with pytest.raises(SchemaIncompatible, match=r"Order\.[ab]\b.*") as caught:
            await new.send(record)
        assert f"({mode})" in str(caught.value)
        assert len(schema_hash(redis_client, app_name)) == 1
        assert sum(lengths(redis_client, old)) == 1


async def test_processor_with_an_incompatible_reader_refuses_to_start(
    redis_url: str, app_name: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="runnel")
    _, old = declare(app_name, redis_url, V1.Order)
    await old.send(*[V1.Order(id=i, item="x", qty=i) for i in range(4)])

    seen: list[Any] = []
    app, new = declare(app_name, redis_url, V3Required.Order, seen)
    async with Running(app) as running:
        assert await running.exit_code() == 1
    assert seen == []
    refusals = [r.getMessage() for r in caplog.records if "cannot start" in r.getMessage()]
    assert len(refusals) == 1, [r.getMessage() for r in caplog.records]
    assert "'proc'" in refusals[0]
    assert "Order.priority" in refusals[0]
    assert f"{app_name}.orders" in refusals[0]
    # It never joined: no consumer group was created on the partitions.
    for p in new.partitions:
        assert redis_client.xinfo_groups(p.key) == []
    assert len(schema_hash(redis_client, app_name)) == 1


async def test_two_producers_racing_with_incompatible_schemas(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """On a fresh stream, exactly one of two incompatible first sends wins, atomically."""

    class Text:
        class Order(Record):
            id: int
            code: str

    class Number:
        class Order(Record):
            id: int
            code: int

    winners = []
    for round_ in range(8):
        name = f"race{round_}"
        streams = []
        for version in (Text, Number):
            app = make_app(app_name, redis_url)
            streams.append(
                app.stream(name, record=version.Order, partition_by="id", serializer="avro")
            )
        text, number = streams
        results = await asyncio.gather(
            text.send(Text.Order(id=1, code="one")),
            number.send(Number.Order(id=1, code=1)),
            return_exceptions=True,
        )
        refused = [r for r in results if isinstance(r, BaseException)]
        assert len(refused) == 1, results
        assert isinstance(refused[0], SchemaIncompatible), refused
        assert "Order.code" in str(refused[0])
        winner = streams[0] if isinstance(results[1], BaseException) else streams[1]
        winners.append(winner.record.model_fields["code"].annotation)
        stored = redis_client.hgetall(f"__schm:{app_name}.{name}")
        assert list(stored) == [winner.serializer.fingerprint.encode()]
        entries = [f for p in winner.partitions for _, f in redis_client.xrange(p.key)]
        assert len(entries) == 1
        assert entries[0][b"data"][2:10].hex() == winner.serializer.fingerprint
        for s in streams:
            await s.app.aclose()


# --- Known gaps -----------------------------------------------------------------------------

ADDED_DEFAULTS = {
    "uuid": (uuid.UUID, uuid.UUID(int=7)),
    "datetime": (datetime.datetime, datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)),
    "date": (datetime.date, datetime.date(2020, 1, 1)),
    "time": (datetime.time, datetime.time(1, 2, 3)),
    "decimal": (
        Annotated[decimal.Decimal, Field(max_digits=6, decimal_places=2)],
        decimal.Decimal("9.99"),
    ),
}


@pytest.mark.parametrize(
    "kind",
    list(ADDED_DEFAULTS),
)
async def test_added_logical_type_field_gets_its_default(
    redis_url: str, app_name: str, kind: str
) -> None:
    """A field added with a datetime/date/time/decimal default is filled in for old data."""
    annotation, default = ADDED_DEFAULTS[kind]
    _, old = declare(app_name, redis_url, V1.Order)
    await old.send(V1.Order(id=1, item="x", qty=1))

    from pydantic import create_model

    new_order = create_model("Order", __base__=V1.Order, extra_field=(annotation, default))
    seen: list[Any] = []
    app, _ = declare(app_name, redis_url, new_order, seen)
    async with Running(app) as running:
        await running.until(lambda: seen, "the v1 event")
        assert await running.stop() == 0
    assert seen == [new_order(id=1, item="x", qty=1)]
    assert seen[0].extra_field == default


async def test_a_damaged_stored_schema_does_not_block_consumers(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """Only events written with the damaged schema fail (as _load intends); others flow."""
    _, orders = declare(app_name, redis_url, V1.Order)
    await orders.send(V1.Order(id=1, item="x", qty=1))
    redis_client.hset(f"__schm:{app_name}.orders", "00112233445566ff", "{not json")

    seen: list[Any] = []
    app, reader = declare(app_name, redis_url, V1.Order, seen)
    await reader.prepare(writing=False)  # loading what is stored must not blow up
    async with Running(app) as running:
        await running.until(lambda: seen, "the valid event")
        assert await running.stop() == 0
    assert seen == [V1.Order(id=1, item="x", qty=1)]
