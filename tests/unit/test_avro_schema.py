"""The ``avro`` serializer without Redis: derived schemas, encoding, compatibility rules."""

from __future__ import annotations

import datetime
import decimal
import enum
import io
import json
import uuid
from pathlib import Path
from typing import Annotated, Any

import fastavro
import pytest
from fastavro.schema import fingerprint, to_parsing_canonical_form
from pydantic import Field

from runnel import App, Record
from runnel.exceptions import DecodeError, Misconfigured
from runnel_avro import AvroSerializer, derive, load_schema, problems, schema_fingerprint

Money = Annotated[decimal.Decimal, Field(max_digits=10, decimal_places=2)]


class Color(enum.Enum):
    """Values are valid Avro names: they are the symbols."""

    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    """Values are not names (ints): the member names are the symbols."""

    LOW = 1
    HIGH = 2


class Mood(enum.Enum):
    """String values that are not valid Avro names: the member names are the symbols."""

    HAPPY = "so happy!"
    GRUMPY = "not-today"


class Address(Record):
    street: str
    zip: str | None = None


class Line(Record):
    sku: str
    qty: int = 1
    price: Money


class Order(Record):
    """An order with one field of each kind Avro carries."""

    order_id: int
    customer: str
    paid: bool
    address: Address
    lines: list[Line]
    created: datetime.datetime
    day: datetime.date
    at: datetime.time
    ref: uuid.UUID
    total: Annotated[decimal.Decimal, Field(max_digits=12, decimal_places=3)]
    exact: decimal.Decimal
    by_sku: dict[str, Line] = {}
    tags: list[str] = []
    attrs: dict[str, int] = {}
    note: str | None = None
    discount: float | None = 0.5
    color: Color = Color.GREEN
    level: Level = Level.LOW
    mood: Mood | None = None
    moods: list[Mood] = []
    blob: bytes = b"\x00\xff"
    ratio: float = 1.5
    count: int = 7
    active: bool = True


def rich_order(**changes: Any) -> Order:
    values: dict[str, Any] = dict(
        order_id=42,
        customer="ada",
        paid=True,
        address=Address(street="1 Main St", zip="12345"),
        lines=[
            Line(sku="a", price=decimal.Decimal("1.25")),
            Line(sku="b", qty=3, price=decimal.Decimal("-99999999.99")),
        ],
        created=datetime.datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=datetime.UTC),
        day=datetime.date(1969, 7, 20),
        at=datetime.time(12, 34, 56, 789),
        ref=uuid.UUID("12345678-1234-5678-1234-567812345678"),
        total=decimal.Decimal("123456789.125"),
        exact=decimal.Decimal("1.000000000000000000000000000001"),
        by_sku={"a": Line(sku="a", qty=2, price=decimal.Decimal("3.10"))},
        tags=["x", "y"],
        attrs={"k": -1, "big": 2**62},
        note="ring twice",
        discount=None,
        color=Color.RED,
        level=Level.HIGH,
        mood=Mood.GRUMPY,
        moods=[Mood.HAPPY, Mood.GRUMPY],
        blob=bytes(range(256)),
        ratio=-0.0001,
        count=0,
        active=False,
    )
    values.update(changes)
    return Order(**values)


def fields_of(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in schema["fields"]}


def avro_stream(app: App, record: type[Record] = Order, serializer: Any = "avro", name="orders"):
    key = next(iter(record.model_fields))
    return app.stream(name, record=record, partition_by=key, serializer=serializer)


# --- The derived schema --------------------------------------------------------------------


def test_derived_schema_is_valid_avro_with_the_expected_types(app: App) -> None:
    """Each Python type maps to its Avro type or logical type; fastavro accepts the whole."""
    stream = avro_stream(app)
    schema = stream.serializer.schema
    fastavro.parse_schema(json.loads(json.dumps(schema)))
    assert schema["type"] == "record" and schema["name"] == "Order"
    assert schema["doc"] == "An order with one field of each kind Avro carries."
    f = fields_of(schema)
    assert f["order_id"]["type"] == "long"
    assert f["customer"]["type"] == "string"
    assert f["paid"]["type"] == "boolean"
    assert f["ratio"]["type"] == "double"
    assert f["blob"]["type"] == "bytes"
    assert f["created"]["type"] == {"type": "long", "logicalType": "timestamp-micros"}
    assert f["day"]["type"] == {"type": "int", "logicalType": "date"}
    assert f["at"]["type"] == {"type": "long", "logicalType": "time-micros"}
    assert f["ref"]["type"] == {"type": "string", "logicalType": "uuid"}
    assert f["total"]["type"] == {
        "type": "bytes",
        "logicalType": "decimal",
        "precision": 12,
        "scale": 3,
    }
    assert f["exact"]["type"] == "string", "a Decimal without digits/places is kept as text"

    address = f["address"]["type"]
    assert address["type"] == "record" and address["name"] == "Address"
    assert fields_of(address)["zip"]["type"] == ["null", "string"]
    lines = f["lines"]["type"]
    assert lines["type"] == "array" and lines["items"]["name"] == "Line"
    assert fields_of(lines["items"])["price"]["type"]["scale"] == 2
    # A named type is defined once; later uses refer to it by name.
    assert f["by_sku"]["type"] == {"type": "map", "values": "Line"}
    assert f["attrs"]["type"] == {"type": "map", "values": "long"}
    assert f["tags"]["type"] == {"type": "array", "items": "string"}


def test_enum_symbols_are_values_when_they_can_be_else_names(app: App) -> None:
    f = fields_of(avro_stream(app).serializer.schema)
    assert f["color"]["type"] == {"type": "enum", "name": "Color", "symbols": ["red", "green"]}
    assert f["level"]["type"] == {"type": "enum", "name": "Level", "symbols": ["LOW", "HIGH"]}
    assert f["mood"]["type"] == [
        "null",
        {"type": "enum", "name": "Mood", "symbols": ["HAPPY", "GRUMPY"]},
    ]
    assert f["moods"]["type"] == {"type": "array", "items": "Mood"}


def test_defaults_are_in_the_schema(app: App) -> None:
    """Optional fields and fields with defaults carry them, in Avro's JSON form."""
    f = fields_of(avro_stream(app).serializer.schema)
    for required in ("order_id", "customer", "address", "lines", "created", "total", "exact"):
        assert "default" not in f[required], required
    assert f["note"]["type"] == ["null", "string"] and f["note"]["default"] is None
    assert f["mood"]["default"] is None
    # A non-null default puts its branch first, as Avro requires.
    assert f["discount"]["type"] == ["double", "null"] and f["discount"]["default"] == 0.5
    assert f["tags"]["default"] == []
    assert f["attrs"]["default"] == {}
    assert f["by_sku"]["default"] == {}
    assert f["color"]["default"] == "green"
    assert f["level"]["default"] == "LOW"
    assert f["moods"]["default"] == []
    assert f["blob"]["default"] == "\u0000\u00ff"
    assert f["count"]["default"] == 7
    assert f["ratio"]["default"] == 1.5
    assert f["active"]["default"] is True
    assert fields_of(f["lines"]["type"]["items"])["qty"]["default"] == 1


def test_defaults_of_logical_types_and_records(app: App) -> None:
    """Logical-type, enum-in-union and nested-record defaults are converted, not dropped."""

    class Defaults(Record):
        id: int
        when: datetime.datetime = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
        day: datetime.date = datetime.date(1970, 1, 2)
        at: datetime.time = datetime.time(1, 2, 3)
        ref: uuid.UUID = uuid.UUID(int=5)
        price: Money = decimal.Decimal("-1.50")
        mood: Mood | None = Mood.HAPPY
        address: Address = Address(street="x")

    stream = avro_stream(app, Defaults, name="defaults")
    f = fields_of(stream.serializer.schema)
    assert f["when"]["default"] == 1_577_836_800_000_000
    assert f["day"]["default"] == 1
    assert f["at"]["default"] == 3_723_000_000
    assert f["ref"]["default"] == "00000000-0000-0000-0000-000000000005"
    assert f["price"]["default"] == (-150).to_bytes(2, "big", signed=True).decode("latin-1")
    assert f["mood"]["type"][1] == "null" and f["mood"]["default"] == "HAPPY"
    assert f["address"]["default"] == {"street": "x", "zip": None}
    fastavro.parse_schema(json.loads(json.dumps(stream.serializer.schema)))
    value = Defaults(id=9)
    assert stream.decode(stream.encode(value)) == value


# --- Encoding ------------------------------------------------------------------------------


def test_rich_record_round_trips(app: App) -> None:
    stream = avro_stream(app)
    for order in (rich_order(), rich_order(note=None, mood=None, discount=2.0, by_sku={})):
        fields = stream.encode(order)
        assert set(fields) == {b"data"}
        assert stream.decode(fields) == order


def test_defaults_round_trip(app: App) -> None:
    stream = avro_stream(app)
    minimal = Order(
        order_id=1,
        customer="c",
        paid=False,
        address=Address(street="s"),
        lines=[],
        created=datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC),
        day=datetime.date(2000, 1, 1),
        at=datetime.time(0, 0),
        ref=uuid.UUID(int=0),
        total=decimal.Decimal("0.000"),
        exact=decimal.Decimal("0"),
    )
    assert stream.decode(stream.encode(minimal)) == minimal


def test_bytes_are_single_object_encoding_readable_by_plain_fastavro(app: App) -> None:
    """C3 01, the schema's CRC-64-AVRO fingerprint, then the Avro body of the record."""
    stream = avro_stream(app)
    serializer = stream.serializer
    data = stream.encode(rich_order())[b"data"]
    assert data[:2] == b"\xc3\x01"
    canonical = to_parsing_canonical_form(serializer.schema)
    assert serializer.fingerprint == fingerprint(canonical, "CRC-64-AVRO")
    assert serializer.fingerprint == schema_fingerprint(serializer.schema)
    assert data[2:10] == bytes.fromhex(serializer.fingerprint)
    body = io.BytesIO(data[10:])
    plain = fastavro.schemaless_reader(body, fastavro.parse_schema(serializer.schema), None)
    assert body.read() == b"", "the body is exactly one record"
    assert plain["order_id"] == 42
    assert plain["mood"] == "GRUMPY" and plain["color"] == "red" and plain["level"] == "HIGH"
    assert plain["total"] == decimal.Decimal("123456789.125")
    assert plain["exact"] == "1.000000000000000000000000000001"
    assert plain["created"] == datetime.datetime(2024, 2, 29, 23, 59, 58, 123456, datetime.UTC)


def test_fingerprint_depends_on_the_schema_only(app: App) -> None:
    first = avro_stream(app, name="a").serializer
    second = avro_stream(app, name="b").serializer
    assert first.fingerprint == second.fingerprint

    class Order(Record):  # same name, one more field
        order_id: int
        extra: int = 0

    assert avro_stream(app, Order, name="c").serializer.fingerprint != first.fingerprint


class Node(Record):
    value: int
    children: list[Node] = []
    parent: Node | None = None


class Tree(Record):
    id: int
    root: Node


def test_recursive_records_refer_to_themselves_by_name(app: App) -> None:
    stream = avro_stream(app, Tree, name="trees")
    node = stream.serializer.schema["fields"][1]["type"]
    assert fields_of(node)["children"]["type"] == {"type": "array", "items": "Node"}
    assert fields_of(node)["parent"]["type"] == ["null", "Node"]
    tree = Tree(
        id=1,
        root=Node(
            value=1, children=[Node(value=2, children=[Node(value=3)])], parent=Node(value=0)
        ),
    )
    assert stream.decode(stream.encode(tree)) == tree


def test_compressed_avro_round_trips(app: App) -> None:
    stream = avro_stream(app, serializer="avro+gzip")
    data = stream.encode(rich_order())[b"data"]
    assert data[:2] == b"\x1f\x8b"
    assert stream.decode({b"data": data}) == rich_order()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{}",
        b"\xc3\x01",
        b"\xc3\x01\x00\x00\x00\x00\x00\x00\x00\x00rest",
        b"\xc3\x02" + b"\x00" * 20,
    ],
    ids=["empty", "json", "marker-only", "unknown-fingerprint", "wrong-marker"],
)
def test_undecodable_data_raises_decode_error(app: App, data: bytes) -> None:
    stream = avro_stream(app)
    with pytest.raises(DecodeError):
        stream.decode({b"data": data})


def test_truncated_body_raises_decode_error(app: App) -> None:
    stream = avro_stream(app)
    data = stream.encode(rich_order())[b"data"]
    with pytest.raises(DecodeError):
        stream.decode({b"data": data[:40]})


def test_unknown_fingerprint_is_named_in_the_error(app: App) -> None:
    stream = avro_stream(app)
    with pytest.raises(DecodeError, match="0102030405060708"):
        stream.decode({b"data": b"\xc3\x01" + bytes(range(1, 9)) + b"\x00"})


# --- What Avro cannot carry ----------------------------------------------------------------


@pytest.mark.parametrize(
    "annotation,says",
    [
        (Any, "Any"),
        (dict[int, str], "str keys"),
        (tuple[int, str], "tuple[X, ...]"),
        (list, "item type"),
        (complex, "complex"),
    ],
    ids=["Any", "dict-int-keys", "fixed-tuple", "bare-list", "complex"],
)
def test_unsupported_types_are_refused_naming_the_field(
    app: App, annotation: Any, says: str
) -> None:
    class Holder(Record):
        id: int
        odd: annotation  # type: ignore[valid-type]

    with pytest.raises(Misconfigured, match=r"Holder\.odd") as caught:
        avro_stream(app, Holder, name="holders")
    assert says in str(caught.value)
    with pytest.raises(Misconfigured, match=r"Holder\.odd"):
        derive(Holder)


def test_unsupported_nested_type_names_the_path(app: App) -> None:
    class Inner(Record):
        bad: dict[int, int]

    class Outer(Record):
        id: int
        items: list[Inner]

    with pytest.raises(Misconfigured, match=r"Outer\.items\[\]\.bad"):
        avro_stream(app, Outer, name="outer")


def test_two_types_with_one_name_are_refused(app: App) -> None:
    def make() -> type[Record]:
        class Address(Record):
            city: str

        return Address

    other = make()

    class Both(Record):
        id: int
        home: Address
        work: other  # type: ignore[valid-type]

    with pytest.raises(Misconfigured, match="Address"):
        avro_stream(app, Both, name="both")


def test_bad_compatibility_mode_is_refused() -> None:
    with pytest.raises(Misconfigured, match="backward"):
        AvroSerializer(compatibility="sideways")


# --- Given schemas -------------------------------------------------------------------------

GIVEN = {
    "type": "record",
    "name": "Ping",
    "namespace": "com.example",
    "doc": "hand-written",
    "fields": [
        {"name": "key", "type": "string"},
        {"name": "n", "type": "long"},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["red", "green"]}},
        {"name": "extra", "type": "string", "default": "from-schema"},
    ],
}


class Ping(Record):
    key: str
    n: int
    color: Color = Color.RED


@pytest.mark.parametrize("form", ["dict", "json", "path-str", "path"])
def test_given_schema_is_used_as_is(app: App, tmp_path: Path, form: str) -> None:
    path = tmp_path / "ping.avsc"
    path.write_text(json.dumps(GIVEN))
    source: Any = {
        "dict": GIVEN,
        "json": json.dumps(GIVEN),
        "path-str": str(path),
        "path": path,
    }[form]
    stream = app.stream(
        "pings", record=Ping, partition_by="key", serializer=AvroSerializer(schema=source)
    )
    assert stream.serializer.schema == GIVEN
    assert stream.serializer.fingerprint == schema_fingerprint(GIVEN)
    ping = Ping(key="k", n=3, color=Color.GREEN)
    data = stream.encode(ping)[b"data"]
    assert data[2:10] == bytes.fromhex(schema_fingerprint(GIVEN))
    assert stream.decode({b"data": data}) == ping
    body = io.BytesIO(data[10:])
    plain = fastavro.schemaless_reader(body, fastavro.parse_schema(GIVEN), None)
    assert plain == {"key": "k", "n": 3, "color": "green", "extra": "from-schema"}


def test_given_schema_missing_a_required_field_is_refused(app: App) -> None:
    schema = {**GIVEN, "fields": [f for f in GIVEN["fields"] if f["name"] != "n"]}
    with pytest.raises(Misconfigured, match=r"Ping\.n"):
        app.stream(
            "pings", record=Ping, partition_by="key", serializer=AvroSerializer(schema=schema)
        )


@pytest.mark.parametrize(
    "source,says",
    [
        ("/no/such/file.avsc", "cannot read"),
        ('{"type": "record", ', "not valid JSON"),
        ('{"type": "string"}', "record schema"),
    ],
    ids=["missing-file", "bad-json", "not-a-record"],
)
def test_bad_given_schemas_are_refused(source: str, says: str) -> None:
    with pytest.raises(Misconfigured, match=says):
        load_schema(source)


# --- compatibility.problems(reader, writer) ------------------------------------------------


def record(*fields: dict[str, Any], name: str = "Record") -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields)}


def field(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


BASE = record(field("id", "long"), field("name", "string"))


def test_added_field_with_default_is_compatible() -> None:
    reader = record(*BASE["fields"], field("qty", "long", default=1))
    assert problems(reader, BASE) == []


def test_removed_field_is_compatible() -> None:
    assert problems(record(field("id", "long")), BASE) == []


def test_widening_long_to_double_is_compatible_and_narrowing_is_not() -> None:
    wide = record(field("id", "double"), field("name", "string"))
    assert problems(wide, BASE) == []
    narrow = problems(BASE, wide)
    assert len(narrow) == 1 and narrow[0].startswith("Record.id:")


def test_added_field_without_default_is_named() -> None:
    reader = record(*BASE["fields"], field("field", "long"))
    found = problems(reader, BASE)
    assert len(found) == 1
    assert found[0].startswith("Record.field:")
    assert "default" in found[0]


def test_changed_type_is_named() -> None:
    reader = record(field("id", "long"), field("name", "long"))
    found = problems(reader, BASE)
    assert found == ["Record.name: string cannot be read as long"]


def test_nested_change_names_the_path() -> None:
    def outer(inner_type: str) -> dict[str, Any]:
        inner = record(field("field", inner_type), name="Inner")
        return record(field("inner", inner), name="Outer")

    found = problems(outer("long"), outer("string"))
    assert len(found) == 1 and found[0].startswith("Outer.inner.field:")


def test_changes_inside_arrays_and_maps_name_the_path() -> None:
    def holder(item: str) -> dict[str, Any]:
        line = record(field("x", "long"), *([field("y", item)] if item else []), name="Line")
        return record(
            field("lines", {"type": "array", "items": line}),
            field("counts", {"type": "map", "values": item or "long"}),
            name="Holder",
        )

    found = problems(holder("string"), holder(""))
    assert any(p.startswith("Holder.lines[].y:") for p in found), found
    assert any(p.startswith("Holder.counts{}:") for p in found), found


def test_enum_symbol_removal_is_named() -> None:
    def with_colors(*symbols: str) -> dict[str, Any]:
        return record(field("color", {"type": "enum", "name": "Color", "symbols": list(symbols)}))

    assert problems(with_colors("red", "green", "blue"), with_colors("red", "green")) == []
    found = problems(with_colors("red", "green"), with_colors("red", "green", "blue"))
    assert len(found) == 1
    assert found[0].startswith("Record.color:") and "blue" in found[0]


def test_several_faults_are_all_named_and_text_schemas_are_accepted() -> None:
    reader = record(field("id", "string"), field("name", "string"), field("new", "long"))
    found = problems(json.dumps(reader), json.dumps(BASE))
    assert [p.split(":")[0] for p in found] == ["Record.id", "Record.new"]


def test_derived_schemas_evolve_as_the_records_do() -> None:
    """The same checks on schemas derived from two versions of one record class."""

    class V1:
        class Order(Record):
            id: int
            qty: int
            note: str = ""

    class V2:
        class Order(Record):
            id: int
            qty: float
            gift: bool = False

    class V3:
        class Order(Record):
            id: int
            qty: int
            priority: int

    v1, v2, v3 = (derive(v.Order).schema for v in (V1, V2, V3))
    assert problems(v2, v1) == [], "widened, removed, added with default"
    assert [p.split(":")[0] for p in problems(v3, v2)] == ["Order.qty", "Order.priority"]
    assert [p.split(":")[0] for p in problems(v3, v1)] == ["Order.priority"]


# --- Known gaps ----------------------------------------------------------------------------


class Tagged(Record):
    kind: Mood


class Plain(Record):
    x: int


class Either(Record):
    id: int
    item: Tagged | Plain


def test_union_of_records_with_converted_fields_round_trips(app: App) -> None:
    stream = app.stream("either", record=Either, partition_by="id", serializer="avro")
    value = Either(id=1, item=Tagged(kind=Mood.HAPPY))
    assert stream.decode(stream.encode(value)) == value
