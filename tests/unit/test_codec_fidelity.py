"""Every built-in codec gives back what it was given, or refuses it where it is given.

A property over generated records, for every built-in serializer with every built-in
compressor and none: encoding either raises :class:`EncodeError` (naming the field), or
decoding gives back an equal record (a NaN compared as NaN). The records hold every
field type the docs list, with the values formats differ on: NaN and the infinities,
integers beyond 64 bits, text with lone surrogates, bytes that are not UTF-8, naive and
aware datetimes and times. The same for job arguments and results, and for table values
and keys (a value a table defers encoding must surely encode).
"""

from __future__ import annotations

import enum
import math
import re
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from runnel import App, Record
from runnel.exceptions import EncodeError, TableError
from runnel.jobs import codec as job_codec
from runnel.plugins.manager import registry
from runnel.tables.codec import ValueCodec, decode_key, deferrable, encode_key


def built_in(kind: str) -> list[str]:
    """The names runnel and its packages register (not the test suite's example plugin)."""
    reg = registry()
    return sorted(
        name
        for name in reg.names(kind)
        if not reg.get(kind, name).factory.__module__.startswith("runnel_example_plugin")
    )


SERIALIZERS = built_in("serializer")
COMPRESSORS = ["", *built_in("compressor")]
CODECS = [s + (f"+{c}" if c else "") for s in SERIALIZERS for c in COMPRESSORS]
JOB_CODECS = [c for c in CODECS if not c.startswith("avro")]  # Avro needs a record


def test_every_built_in_codec_is_covered() -> None:
    assert {"json", "msgpack", "avro"} <= set(SERIALIZERS)
    assert {"gzip", "zstd", "lz4"} <= set(COMPRESSORS)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Line(Record):
    sku: str
    quantity: int
    price: float


class Everything(Record):
    key: str
    n: int
    x: float
    flag: bool
    text: str
    blob: bytes
    when: datetime
    day: date
    at: time
    amount: Decimal
    exact: Decimal
    uid: uuid.UUID
    color: Color
    lines: list[Line]
    scores: dict[str, float]
    counts: list[int]
    maybe: float | None = None
    nested: Line | None = None


NASTY_INTS = [2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30, -(10**30)]
NASTY_FLOATS = [math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308]
ZONES = [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]

ints = st.integers() | st.sampled_from(NASTY_INTS)
floats = st.floats() | st.sampled_from(NASTY_FLOATS)
texts = st.text(st.characters(exclude_categories=()), max_size=8)  # lone surrogates too
zones = st.none() | st.sampled_from(ZONES)
datetimes = st.builds(lambda d, z: d.replace(tzinfo=z), st.datetimes(), zones)
times = st.builds(lambda t, z: t.replace(tzinfo=z), st.times(), zones)
lines = st.builds(Line, sku=texts, quantity=ints, price=floats)

records = st.builds(
    Everything,
    key=texts,
    n=ints,
    x=floats,
    flag=st.booleans(),
    text=texts,
    blob=st.binary(max_size=8),
    when=datetimes,
    day=st.dates(),
    at=times,
    amount=st.decimals(allow_nan=False, allow_infinity=False, places=2),
    exact=st.decimals(allow_nan=False, allow_infinity=False),
    uid=st.uuids(),
    color=st.sampled_from(Color),
    lines=st.lists(lines, max_size=3),
    scores=st.dictionaries(texts, floats, max_size=3),
    counts=st.lists(ints, max_size=3),
    maybe=st.none() | floats,
    nested=st.none() | lines,
)

PLAIN = Everything(
    key="k",
    n=1,
    x=0.5,
    flag=True,
    text="t",
    blob=b"b",
    when=datetime(2024, 5, 1, 12, tzinfo=UTC),
    day=date(2024, 5, 1),
    at=time(12, 30),
    amount=Decimal("1.25"),
    exact=Decimal("3.14159"),
    uid=uuid.UUID(int=7),
    color=Color.RED,
    lines=[Line(sku="a", quantity=2, price=1.5)],
    scores={"a": 1.0},
    counts=[1, 2],
)


def same(a: Any, b: Any) -> bool:
    """Equality, with NaN equal to NaN, through records, lists and dicts."""
    if isinstance(a, Record) and type(a) is type(b):
        return all(same(getattr(a, f), getattr(b, f)) for f in type(a).model_fields)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@pytest.fixture(scope="module")
def streams() -> dict[str, Any]:
    app = App(name="fidelity", redis_url="memory://fidelity")
    return {
        spec: app.stream(f"s{i}", record=Everything, partition_by="key", serializer=spec)
        for i, spec in enumerate(CODECS)
    }


@pytest.mark.parametrize("spec", CODECS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=records)
@example(record=PLAIN)
@example(record=PLAIN.model_copy(update={"x": math.nan}))
@example(record=PLAIN.model_copy(update={"scores": {"a": -math.inf}}))
@example(record=PLAIN.model_copy(update={"lines": [Line(sku="a", quantity=1, price=math.inf)]}))
@example(record=PLAIN.model_copy(update={"n": 2**64}))
@example(record=PLAIN.model_copy(update={"counts": [-(2**63) - 1]}))
@example(record=PLAIN.model_copy(update={"text": "a\ud800b"}))
@example(record=PLAIN.model_copy(update={"blob": b"\xff\x00"}))
@example(record=PLAIN.model_copy(update={"when": datetime(2024, 5, 1, 12)}))
@example(record=PLAIN.model_copy(update={"at": time(12, 30, tzinfo=ZONES[1])}))
def test_a_record_comes_back_equal_or_is_refused(
    streams: dict[str, Any], spec: str, record: Everything
) -> None:
    stream = streams[spec]
    try:
        fields = stream.encode(record)
    except EncodeError as exc:
        assert str(exc), "the refusal says why"
        return
    assert same(stream.decode(fields), record)


def test_what_each_format_refuses_is_named(streams: dict[str, Any]) -> None:
    """The refusals the docs list, each naming the field at fault."""
    refused = {
        ("json", "x"): PLAIN.model_copy(update={"x": math.nan}),
        ("json", "scores.a"): PLAIN.model_copy(update={"scores": {"a": math.inf}}),
        ("json", "lines[0].price"): PLAIN.model_copy(
            update={"lines": [Line(sku="a", quantity=1, price=-math.inf)]}
        ),
        ("json", "blob"): PLAIN.model_copy(update={"blob": b"\xff"}),
        ("msgpack", "n"): PLAIN.model_copy(update={"n": 2**64}),
        ("avro", "n"): PLAIN.model_copy(update={"n": 2**63}),
        ("avro", "when"): PLAIN.model_copy(update={"when": datetime(2024, 5, 1)}),
        ("avro", "at"): PLAIN.model_copy(update={"at": time(1, tzinfo=UTC)}),
    }
    for serializer in SERIALIZERS:
        refused[(serializer, "text")] = PLAIN.model_copy(update={"text": "\udc80"})
    for (spec, field), record in refused.items():
        with pytest.raises(EncodeError, match=rf"^{re.escape(field)}: "):
            streams[spec].encode(record)
    kept = {
        "json": {"n": 2**64, "counts": [-(10**30)]},
        "msgpack": {"x": math.nan, "scores": {"a": -math.inf}, "n": 2**64 - 1},
        "avro": {"x": math.inf, "lines": [Line(sku="a", quantity=1, price=math.nan)]},
    }
    for spec, update in kept.items():
        record = PLAIN.model_copy(update=update)
        assert same(streams[spec].decode(streams[spec].encode(record)), record), spec


class Click(Record, primitive=True):
    user: str
    n: int
    ratio: float
    raw: bytes
    ok: bool


@settings(max_examples=200, deadline=None)
@given(
    st.builds(Click, user=texts, n=ints, ratio=floats, raw=st.binary(max_size=8), ok=st.booleans())
)
def test_a_primitive_record_comes_back_equal_or_is_refused(click: Click) -> None:
    """Fields go to the store as bytes (the memory store turns values into bytes as Redis
    does), and come back from those bytes."""
    from runnel.memory.logs import decode_fields

    app = App(name="prim", redis_url="memory://prim")
    stream = app.stream("clicks", record=Click, partition_by="user")
    try:
        fields = stream.encode(click)
    except EncodeError as exc:
        assert str(exc).startswith("user: text with a lone surrogate")
        return
    assert same(stream.decode(decode_fields(fields)), click)


# Jobs: arguments and results, as plain data and records.

json_values = st.recursive(
    st.none() | st.booleans() | ints | floats | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


@pytest.mark.parametrize("spec", JOB_CODECS)
@settings(max_examples=100, deadline=None)
@given(args=st.lists(json_values, max_size=3), kwargs=st.dictionaries(texts, json_values))
@example(args=[math.nan], kwargs={})
@example(args=[], kwargs={"x": [1, {"y": -math.inf}]})
@example(args=[2**64, -(2**70)], kwargs={})
@example(args=["\ud800"], kwargs={})
@example(args=[None, [None]], kwargs={"n": None})
def test_job_arguments_and_results_come_back_equal_or_are_refused(
    spec: str, args: list[Any], kwargs: dict[str, Any]
) -> None:
    serializer = job_codec.serializer_named(spec)
    try:
        data = job_codec.encode_arguments(serializer, "job", tuple(args), kwargs)
    except EncodeError as exc:
        assert str(exc).startswith("job 'job': cannot encode the arguments: ")
    else:
        back_args, back_kwargs = job_codec.decode_arguments(serializer, data)
        assert same(back_args, args) and same(back_kwargs, kwargs)
    try:
        item = job_codec.result_item(serializer, [args, kwargs])
    except EncodeError:
        return
    ok, value = job_codec.read_item(serializer, item)
    assert ok and same(value, [args, kwargs])


# Tables: values (plain and records) and keys.

TABLE_CODECS = [c for c in CODECS if not c.startswith("avro")]  # Avro needs a record


@pytest.mark.parametrize("spec", TABLE_CODECS)
@settings(max_examples=100, deadline=None)
@given(value=json_values)
@example(value=math.nan)
@example(value=[1, math.inf])
@example(value=2**64)
@example(value=2**70)
@example(value="\udfff")
def test_a_table_value_comes_back_equal_or_is_refused(spec: str, value: Any) -> None:
    """And a value the table would encode only at the commit (``deferrable``) surely
    encodes: one that cannot must fail the event that wrote it, not the commit."""
    from runnel.codecs.resolve import resolve_serializer

    codec = ValueCodec(resolve_serializer(spec), None)
    try:
        data = codec.encode(value)
    except TableError:
        assert not deferrable(value), "a deferred value failed to encode at the commit"
        return
    assert same(codec.decode(data), value)


@pytest.mark.parametrize("spec", [c for c in CODECS if "+" not in c])
@settings(max_examples=100, deadline=None)
@given(record=records)
def test_a_table_record_comes_back_equal_or_is_refused(spec: str, record: Everything) -> None:
    from runnel.codecs.resolve import resolve_serializer

    serializer = resolve_serializer(spec)
    codec = ValueCodec(serializer.bind(Everything), Everything)
    try:
        data = codec.encode(record)
    except TableError:
        return
    assert same(codec.decode(data), record)


@settings(max_examples=200, deadline=None)
@given(key=texts | ints | floats | st.tuples(texts, ints | floats))
@example(key=math.nan)
@example(key=("a", math.inf))
def test_a_table_key_comes_back_equal_or_is_refused(key: Any) -> None:
    """NaN would be stored as null, the key of None."""
    try:
        data = encode_key(key)
    except TableError:
        return
    back = decode_key(data)
    assert same(tuple(back) if isinstance(key, tuple) else back, key)
