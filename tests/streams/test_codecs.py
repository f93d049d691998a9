"""Every serializer and compressor through a real worker, and what lands in Redis."""

from __future__ import annotations

import datetime
import decimal
import enum
import gzip
import json
import uuid
from pathlib import Path
from typing import Annotated, Any

import lz4.frame
import msgpack
import orjson
import pytest
import redis
import zstandard
from pydantic import Field

from runnel import App, Record, Stream
from runnel.codecs import GzipCompressor, JSONSerializer, MsgpackSerializer
from runnel_avro import AvroSerializer, schema_fingerprint
from tests.support.apps import Running, make_app

MAGIC = {
    "gzip": b"\x1f\x8b",
    "zstd": b"\x28\xb5\x2f\xfd",
    "lz4": b"\x04\x22\x4d\x18",
}
DECOMPRESS = {
    "gzip": gzip.decompress,
    "zstd": zstandard.ZstdDecompressor().decompress,
    "lz4": lz4.frame.decompress,
}


class Status(enum.Enum):
    NEW = "new"
    PAID = "paid"


class Line(Record):
    sku: str
    qty: int


class Order(Record):
    key: str
    n: int
    status: Status = Status.NEW
    at: datetime.datetime
    total: Annotated[decimal.Decimal, Field(max_digits=9, decimal_places=2)]
    ref: uuid.UUID
    lines: list[Line] = []
    attrs: dict[str, float] = {}
    note: str | None = None


def order(key: str, n: int) -> Order:
    return Order(
        key=key,
        n=n,
        status=Status.PAID if n % 2 else Status.NEW,
        at=datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(seconds=n),
        total=decimal.Decimal(n) / 4,
        ref=uuid.UUID(int=n),
        lines=[Line(sku=f"s{i}", qty=i) for i in range(n % 3)],
        attrs={"w": n / 2},
        note=None if n % 3 else f"note {n}" * 40,  # long enough to be worth compressing
    )


def stored_data(client: redis.Redis, stream: Stream) -> list[bytes]:
    return [fields[b"data"] for p in stream.partitions for _, fields in client.xrange(p.key)]


async def round_trip(app: App, stream: Stream, count: int = 40, keys: int = 5) -> list[Order]:
    """Send ``count`` orders over ``keys`` keys in a few calls; return what the processor got."""
    got: list[Order] = []

    @app.processor(stream)
    async def proc(events):
        async for record in events.records():
            got.append(record)

    sent = [order(f"k{i % keys}", i) for i in range(count)]
    half = count // 2
    await stream.send(*sent[:half])
    async with Running(app) as running:
        for one in sent[half:]:
            await stream.send(one)
        await running.until(lambda: len(got) >= count, "every order")
        assert await running.stop() == 0
    assert len(got) == count
    for key in {o.key for o in sent}:
        assert [o for o in got if o.key == key] == [o for o in sent if o.key == key], key
    return sent


def plain(serializer: str, data: bytes) -> Any:
    """The record as the format itself reads it (without Runnel)."""
    if serializer == "json":
        assert data[:1] == b"{"
        return orjson.loads(data)
    assert serializer == "msgpack"
    assert 0x80 <= data[0] <= 0x8F or data[0] in (0xDE, 0xDF), "a msgpack map"
    return msgpack.unpackb(data, raw=False)


@pytest.mark.parametrize("compressor", [None, "gzip", "zstd", "lz4"])
@pytest.mark.parametrize("serializer", ["json", "msgpack", "avro"])
async def test_codec_round_trip_and_stored_format(
    redis_url: str,
    app_name: str,
    redis_client: redis.Redis,
    serializer: str,
    compressor: str | None,
) -> None:
    """Records come back equal and in key order; Redis holds exactly that format."""
    app = make_app(app_name, redis_url)
    spec = serializer if compressor is None else f"{serializer}+{compressor}"
    orders = app.stream(
        "orders", record=Order, partition_by="key", partition_count=3, serializer=spec
    )
    assert orders.serializer.name == serializer
    assert getattr(orders.serializer.compressor, "name", None) == compressor

    sent = await round_trip(app, orders)

    stored = stored_data(redis_client, orders)
    assert len(stored) == len(sent)
    schemas = redis_client.hgetall(f"__schm:{app_name}.orders")
    for data in stored:
        if compressor is not None:
            assert data.startswith(MAGIC[compressor]), data[:8]
            data = DECOMPRESS[compressor](data)
        if serializer == "avro":
            assert data[:2] == b"\xc3\x01"
            assert data[2:10].hex().encode() in schemas
        else:
            assert set(plain(serializer, data)) == set(Order.model_fields)
    if serializer == "avro":
        fp = orders.serializer.fingerprint
        assert schemas == {fp.encode(): json.dumps(orders.serializer.schema).encode()}
    else:
        assert schemas == {}, "only Avro stores schemas"


async def test_compression_makes_repetitive_records_smaller(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    sizes = {}
    for spec in ("json", "json+gzip", "json+zstd", "json+lz4", "avro", "avro+zstd"):
        stream = app.stream(
            spec.replace("+", "_"), record=Order, partition_by="key", serializer=spec
        )
        await stream.send(order("k", 0))
        [data] = stored_data(redis_client, stream)
        sizes[spec] = len(data)
    for spec in ("json+gzip", "json+zstd", "json+lz4"):
        assert sizes[spec] < sizes["json"], sizes
    assert sizes["avro"] < sizes["json"], sizes
    assert sizes["avro+zstd"] < sizes["avro"], sizes


# --- Choosing the serializer -------------------------------------------------------------


async def test_app_default_serializer_keyword(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url, default_serializer="msgpack")
    orders = app.stream("orders", record=Order, partition_by="key", partition_count=2)
    assert isinstance(orders.serializer, MsgpackSerializer)
    assert orders.serializer.compressor is None
    # A stream's own serializer wins over the default.
    other = app.stream("other", record=Order, partition_by="key", serializer="json")
    assert isinstance(other.serializer, JSONSerializer)

    sent = await round_trip(app, orders, count=12)
    stored = stored_data(redis_client, orders)
    assert sorted(plain("msgpack", d)["n"] for d in stored) == [o.n for o in sent]


@pytest.mark.parametrize(
    "value,kind,magic",
    [
        ("msgpack", MsgpackSerializer, None),
        ("msgpack+zstd", MsgpackSerializer, "zstd"),
        ("avro+lz4", AvroSerializer, "lz4"),
    ],
)
async def test_app_default_serializer_from_the_environment(
    redis_url: str,
    app_name: str,
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    kind: type,
    magic: str | None,
) -> None:
    monkeypatch.setenv("RUNNEL_DEFAULT_SERIALIZER", value)
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="key", partition_count=2)
    assert isinstance(orders.serializer, kind)
    assert getattr(orders.serializer.compressor, "name", None) == magic

    await round_trip(app, orders, count=12)
    for data in stored_data(redis_client, orders):
        if magic is not None:
            assert data.startswith(MAGIC[magic])
            data = DECOMPRESS[magic](data)
        if kind is MsgpackSerializer:
            plain("msgpack", data)
        else:
            assert data[:2] == b"\xc3\x01"


async def test_keyword_wins_over_the_environment(
    redis_url: str, app_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNNEL_DEFAULT_SERIALIZER", "msgpack")
    app = make_app(app_name, redis_url, default_serializer="avro")
    orders = app.stream("orders", record=Order, partition_by="key")
    assert isinstance(orders.serializer, AvroSerializer)


# --- Avro with a given .avsc file ----------------------------------------------------------

ORDER_AVSC = {
    "type": "record",
    "name": "Order",
    "namespace": "shop.v1",
    "doc": "written by hand",
    "fields": [
        {"name": "key", "type": "string"},
        {"name": "n", "type": "long"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["new", "paid"]}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {
            "name": "total",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {
            "name": "lines",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Line",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "qty", "type": "long"},
                    ],
                },
            },
            "default": [],
        },
        {"name": "attrs", "type": {"type": "map", "values": "double"}, "default": {}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "source", "type": "string", "default": "avsc"},
    ],
}


@pytest.mark.parametrize("compressor", [None, "gzip"])
async def test_avro_with_an_avsc_file(
    redis_url: str,
    app_name: str,
    redis_client: redis.Redis,
    tmp_path: Path,
    compressor: str | None,
) -> None:
    """The given schema is what is written and stored; records round trip through it."""
    path = tmp_path / "order.avsc"
    path.write_text(json.dumps(ORDER_AVSC, indent=2))
    app = make_app(app_name, redis_url)
    serializer = AvroSerializer(None if compressor is None else GzipCompressor(), schema=str(path))
    orders = app.stream(
        "orders", record=Order, partition_by="key", partition_count=2, serializer=serializer
    )
    await round_trip(app, orders, count=16, keys=3)

    fp = schema_fingerprint(ORDER_AVSC)
    stored = redis_client.hgetall(f"__schm:{app_name}.orders")
    assert list(stored) == [fp.encode()]
    assert json.loads(stored[fp.encode()]) == ORDER_AVSC
    for data in stored_data(redis_client, orders):
        if compressor is not None:
            data = DECOMPRESS[compressor](data)
        assert data[:10] == b"\xc3\x01" + bytes.fromhex(fp)
