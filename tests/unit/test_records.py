"""Records: validation, nesting, and encode/decode through every built-in serializer."""

from __future__ import annotations

import gzip
from datetime import UTC, date, datetime, timedelta, timezone

import msgpack
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from runnel import Misconfigured, Record
from runnel.codecs import GzipCompressor, JSONSerializer, MsgpackSerializer
from runnel.exceptions import DecodeError

SERIALIZERS = ["json", "msgpack", "json+gzip", "msgpack+gzip"]


class Item(Record):
    id: int
    name: str
    tags: list[str] = []


class Order(Record):
    order_id: int
    created_at: datetime
    items: list[Item]
    due: date | None = None
    history: list[datetime] = []
    notes: dict[str, list[int]] = {}


class Click(Record, primitive=True):
    user: str
    n: int
    ratio: float
    ok: bool
    raw: bytes


def an_order() -> Order:
    return Order(
        order_id=7,
        created_at=datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC),
        items=[Item(id=1, name="widget", tags=["a", "b"]), Item(id=2, name="gädget")],
        due=date(2020, 2, 1),
        history=[
            datetime(2020, 1, 1, 0, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2))),
            datetime(2021, 6, 30, 23, 59, 59),  # naive stays naive
        ],
        notes={"x": [1, 2, 3]},
    )


# Nested records.


def test_nested_record_validates_from_plain_data():
    order = Order.model_validate(
        {
            "order_id": "7",
            "created_at": "2020-01-02T03:04:05+00:00",
            "items": [
                {"id": 1, "name": "widget", "tags": ["a", "b"]},
                {"id": "2", "name": "gädget"},
            ],
            "due": "2020-02-01",
            "history": ["2020-01-01T00:00:00.123456+02:00", "2021-06-30T23:59:59"],
            "notes": {"x": [1, 2, 3]},
        }
    )
    assert order == an_order()
    assert isinstance(order.items[0], Item)


@pytest.mark.parametrize("serializer", SERIALIZERS)
def test_nested_record_round_trips(app, serializer):
    stream = app.stream("orders", record=Order, partition_by="order_id", serializer=serializer)
    order = an_order()
    fields = stream.encode(order)
    assert list(fields) == [b"data"]
    assert isinstance(fields[b"data"], bytes)
    back = stream.decode(fields)
    assert back == order
    assert back.created_at.utcoffset() == timedelta(0)
    assert back.history[0].utcoffset() == timedelta(hours=2)
    assert back.history[1].tzinfo is None
    assert isinstance(back.items[1], Item)


@pytest.mark.parametrize(
    ("serializer", "kind", "compressed"),
    [
        ("json", JSONSerializer, False),
        ("msgpack", MsgpackSerializer, False),
        ("json+gzip", JSONSerializer, True),
        ("msgpack+gzip", MsgpackSerializer, True),
    ],
)
def test_serializer_names_resolve_and_shape_the_bytes(app, serializer, kind, compressed):
    stream = app.stream("orders", record=Order, partition_by="order_id", serializer=serializer)
    assert isinstance(stream.serializer, kind)
    assert isinstance(stream.serializer.compressor, GzipCompressor) is compressed
    data = stream.encode(an_order())[b"data"]
    assert data.startswith(b"\x1f\x8b") is compressed
    raw = gzip.decompress(data) if compressed else data
    plain = orjson.loads(raw) if kind is JSONSerializer else msgpack.unpackb(raw)
    assert plain["order_id"] == 7
    assert plain["items"][1] == {"id": 2, "name": "gädget", "tags": []}


def test_gzip_output_is_deterministic(app):
    stream = app.stream("orders", record=Order, partition_by="order_id", serializer="json+gzip")
    assert stream.encode(an_order()) == stream.encode(an_order())


def test_stream_accepts_serializer_objects(app):
    ser = MsgpackSerializer(compressor=GzipCompressor(level=1))
    stream = app.stream("orders", record=Order, partition_by="order_id", serializer=ser)
    assert stream.serializer is ser
    assert stream.decode(stream.encode(an_order())) == an_order()


def test_validate_turns_dicts_into_records(app):
    stream = app.stream("orders", record=Order, partition_by="order_id")
    order = an_order()
    assert stream.validate(order) is order
    assert stream.validate(order.model_dump()) == order
    assert stream.validate(order.model_dump(mode="json")) == order


def test_msgpack_keeps_arbitrary_bytes_in_nested_record(app):
    class Blob(Record):
        id: int
        payload: bytes

    stream = app.stream("blobs", record=Blob, partition_by="id", serializer="msgpack")
    blob = Blob(id=1, payload=b"\xff\x00\x80")
    assert stream.decode(stream.encode(blob)) == blob


# Validation errors name the field.


def test_validation_error_names_the_field():
    with pytest.raises(ValidationError) as info:
        Order(order_id="not-a-number", created_at=datetime(2020, 1, 1), items=[])
    assert [e["loc"] for e in info.value.errors()] == [("order_id",)]
    assert "order_id" in str(info.value)


def test_validation_error_names_nested_fields(app):
    stream = app.stream("orders", record=Order, partition_by="order_id")
    with pytest.raises(ValidationError) as info:
        stream.validate(
            {
                "order_id": 1,
                "created_at": "yesterday",
                "items": [{"id": "x", "name": "a"}, {"id": 2}],
            }
        )
    locs = {e["loc"] for e in info.value.errors()}
    assert locs == {("created_at",), ("items", 0, "id"), ("items", 1, "name")}


def test_missing_field_is_named():
    with pytest.raises(ValidationError) as info:
        Item(id=1)
    assert info.value.errors()[0]["loc"] == ("name",)
    assert info.value.errors()[0]["type"] == "missing"


# Primitive records.


def test_primitive_record_encodes_to_native_pairs(app):
    stream = app.stream("clicks", record=Click, partition_by="user")
    assert stream.serializer is None
    fields = stream.encode(Click(user="ann", n=3, ratio=0.5, ok=True, raw=b"\x00\xff"))
    assert fields == {
        b"user": b"ann",  # text as UTF-8, as the transport sends it
        b"n": 3,
        b"ratio": 0.5,
        b"ok": b"True",
        b"raw": b"\x00\xff",
    }
    assert b"data" not in fields
    assert stream.encode(Click(user="", n=0, ratio=0, ok=False, raw=b""))[b"ok"] == b"False"


def test_primitive_stream_refuses_a_serializer_argument(app):
    """As in runnel 0.1: a primitive record is stored as native pairs, never serialized."""
    with pytest.raises(Misconfigured, match=r"primitive record.*cannot have a serializer"):
        app.stream("clicks", record=Click, partition_by="user", serializer="msgpack+gzip")
    assert "clicks" not in app.streams
    stream = app.stream("clicks", record=Click, partition_by="user")
    with pytest.raises(Misconfigured, match="cannot have a serializer"):
        stream.clone(serializer=JSONSerializer())


def test_primitive_record_decodes_from_bytes(app):
    stream = app.stream("clicks", record=Click, partition_by="user")
    stored = {
        b"user": "bé".encode(),
        b"n": b"-12",
        b"ratio": b"2.5",
        b"ok": b"1",
        b"raw": b"\x00\xff",
    }
    assert stream.decode(stored) == Click(user="bé", n=-12, ratio=2.5, ok=True, raw=b"\x00\xff")
    stored[b"ok"] = b"0"
    assert stream.decode(stored).ok is False


@pytest.mark.parametrize(
    "annotation",
    ["datetime", "list[int]", "int | None", "dict[str, int]", "Item"],
)
def test_primitive_record_rejects_non_primitive_fields(annotation):
    namespace = {"Record": Record, "datetime": datetime, "Item": Item}
    source = f"class Bad(Record, primitive=True):\n    fine: int\n    offending: {annotation}\n"
    with pytest.raises(Misconfigured, match="offending"):
        exec(source, namespace)


def test_non_primitive_record_allows_anything():
    class Fine(Record):
        when: datetime
        maybe: int | None = None

    assert not Fine.is_primitive()
    assert Click.is_primitive()


# Garbage in: DecodeError.


@pytest.mark.parametrize("serializer", SERIALIZERS)
@pytest.mark.parametrize(
    "fields",
    [
        {b"data": b"\x00garbage\xff{"},
        {b"other": b"{}"},
        {},
    ],
    ids=["garbage", "no-data-field", "empty"],
)
def test_decode_garbage_raises_decode_error(app, serializer, fields):
    stream = app.stream("orders", record=Order, partition_by="order_id", serializer=serializer)
    with pytest.raises(DecodeError):
        stream.decode(fields)


@pytest.mark.parametrize("serializer", SERIALIZERS)
def test_decode_valid_encoding_of_wrong_shape_raises_decode_error(app, serializer):
    stream = app.stream("orders", record=Order, partition_by="order_id", serializer=serializer)
    other = app.stream("items", record=Item, partition_by="id", serializer=serializer)
    with pytest.raises(DecodeError, match="Order"):
        stream.decode(other.encode(Item(id=1, name="x")))


def test_decode_uncompressed_on_gzip_stream_raises_decode_error(app):
    plain = app.stream("orders", record=Order, partition_by="order_id", serializer="json")
    zipped = app.stream("orders2", record=Order, partition_by="order_id", serializer="json+gzip")
    with pytest.raises(DecodeError):
        zipped.decode(plain.encode(an_order()))


@pytest.mark.parametrize(
    "fields",
    [
        {b"user": b"a", b"n": b"many", b"ratio": b"1", b"ok": b"1", b"raw": b""},
        {b"user": b"a", b"ratio": b"1", b"ok": b"1", b"raw": b""},
        {b"user": b"\xff\xfe", b"n": b"1", b"ratio": b"1", b"ok": b"1", b"raw": b""},
        {b"user": b"a", b"n": b"1", b"ratio": b"1", b"ok": b"maybe", b"raw": b""},
    ],
    ids=["bad-int", "missing", "bad-utf8", "bad-bool"],
)
def test_decode_bad_primitive_raises_decode_error(app, fields):
    stream = app.stream("clicks", record=Click, partition_by="user")
    with pytest.raises(DecodeError):
        stream.decode(fields)


# Property: primitive records survive encode, the trip through Redis as bytes, and decode.


def _as_stored(value) -> bytes:
    """What a Redis client writes (and reads back) for a field value, as redis-py does it."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bool):
        raise AssertionError("bools must be encoded by runnel, not left to the client")
    if isinstance(value, int | float):
        return repr(value).encode()
    assert isinstance(value, str)
    return value.encode("utf-8")


clicks = st.builds(
    Click,
    user=st.text(),
    n=st.integers(min_value=-(2**80), max_value=2**80),
    ratio=st.floats(allow_nan=False),
    ok=st.booleans(),
    raw=st.binary(),
)


@settings(deadline=None)
@given(click=clicks)
def test_primitive_records_round_trip(click):
    from runnel import App

    stream = App(name="u", redis_url="redis://127.0.0.1:1").stream(
        "clicks", record=Click, partition_by="user"
    )
    fields = stream.encode(click)
    assert stream.decode(fields) == click
    stored = {k: _as_stored(v) for k, v in fields.items()}
    back = stream.decode(stored)
    assert back == click
    assert type(back.ok) is bool and type(back.n) is int and type(back.ratio) is float


@settings(deadline=None)
@given(
    order_id=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    names=st.lists(st.text(), max_size=4),
    when=st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5, minutes=-30))])),
    serializer=st.sampled_from(SERIALIZERS),
)
def test_nested_records_round_trip(order_id, names, when, serializer):
    from runnel import App

    app = App(name="u", redis_url="redis://127.0.0.1:1")
    stream = app.stream("orders", record=Order, partition_by="order_id", serializer=serializer)
    order = Order(
        order_id=order_id, created_at=when, items=[Item(id=i, name=n) for i, n in enumerate(names)]
    )
    back = stream.decode(stream.encode(order))
    assert back == order
    assert back.created_at.utcoffset() == when.utcoffset()
