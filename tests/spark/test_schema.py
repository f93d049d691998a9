"""Record -> Spark schema mapping, id parsing and split planning: no Spark job, no Redis."""

from __future__ import annotations

import datetime
import decimal
import enum
import itertools
import pickle
import uuid
from typing import Any

import pytest
from pydantic import condecimal
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
)

from runnel import Record
from runnel.exceptions import Misconfigured
from runnel_spark import ranges
from runnel_spark.schema import derive, into_record, record_schema
from runnel_spark.target import Target


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    LOW = 1


class Inner(Record):
    a: int
    b: str | None = None


class Tree(Record):
    name: str
    children: list[Tree] = []


class Everything(Record):
    flag: bool
    count: int
    ratio: float
    text: str
    raw: bytes
    when: datetime.datetime
    day: datetime.date
    at: datetime.time
    ident: uuid.UUID
    money: condecimal(max_digits=10, decimal_places=3)  # type: ignore[valid-type]
    loose: decimal.Decimal
    colour: Colour
    level: Level
    inner: Inner
    inners: list[Inner]
    tags: set[str]
    scores: dict[str, float]
    maybe: int | None = None
    either: int | str = 0
    anything: Any = None
    pair: tuple[int, str] = (0, "")
    tree: Tree | None = None


def types_of(record: type[Record]) -> dict[str, Any]:
    return {f.name: (f.dataType, f.nullable) for f in record_schema(record).fields}


def test_field_types_map_to_spark_types() -> None:
    found = types_of(Everything)
    inner = StructType().add("a", LongType(), False).add("b", StringType(), True)
    assert found == {
        "flag": (BooleanType(), False),
        "count": (LongType(), False),
        "ratio": (DoubleType(), False),
        "text": (StringType(), False),
        "raw": (BinaryType(), False),
        "when": (TimestampType(), False),
        "day": (DateType(), False),
        "at": (StringType(), False),
        "ident": (StringType(), False),
        "money": (DecimalType(10, 3), False),
        "loose": (StringType(), False),
        "colour": (StringType(), False),
        "level": (LongType(), False),
        "inner": (inner, False),
        "inners": (ArrayType(inner, False), False),
        "tags": (ArrayType(StringType(), False), False),
        "scores": (MapType(StringType(), DoubleType(), False), False),
        "maybe": (LongType(), True),
        # No Spark type for these: JSON text.
        "either": (StringType(), True),
        "anything": (StringType(), True),
        "pair": (StringType(), True),
        # A record inside itself: JSON text from where it recurs.
        "tree": (
            StructType()
            .add("name", StringType(), False)
            .add("children", ArrayType(StringType(), True), False),
            True,
        ),
    }


def test_values_convert_out_and_back() -> None:
    value = Everything(
        flag=True,
        count=3,
        ratio=0.5,
        text="t",
        raw=b"\x00",
        when=datetime.datetime(2024, 5, 1, tzinfo=datetime.UTC),
        day=datetime.date(2024, 5, 1),
        at=datetime.time(12, 30),
        ident=uuid.UUID(int=7),
        money=decimal.Decimal("1.250"),
        loose=decimal.Decimal("1e-30"),
        colour=Colour.RED,
        level=Level.LOW,
        inner=Inner(a=1),
        inners=[Inner(a=2, b="x")],
        tags={"a"},
        scores={"s": 1.5},
        either="x",
        anything={"k": [1, 2]},
        pair=(1, "a"),
        tree=Tree(name="root", children=[Tree(name="leaf")]),
    )
    row = {
        c.name: (c.out(value.__dict__[c.name]) if c.out else value.__dict__[c.name])
        for c in derive(Everything)
    }
    assert row["colour"] == "red" and row["level"] == 1 and row["at"] == "12:30:00"
    assert row["inner"] == {"a": 1, "b": None}
    assert row["anything"] == '{"k":[1,2]}' and row["pair"] == '[1,"a"]'
    # Spark hands maps back as (key, value) pairs from Arrow; nested values as JSON in CSV.
    row["scores"] = list(row["scores"].items())
    row["inners"] = '[{"a": 2, "b": "x"}]'
    assert Everything.model_validate(into_record(Everything)(row)) == value


def test_enum_of_mixed_values_is_carried_by_name() -> None:
    class Mixed(enum.Enum):
        ONE = 1
        TWO = "two"

    class Holder(Record):
        m: Mixed

    [column] = derive(Holder)
    assert column.type == StringType() and column.out is not None
    assert column.out(Mixed.ONE) == "ONE"
    assert Holder.model_validate(into_record(Holder)({"m": "TWO"})).m is Mixed.TWO


@pytest.mark.parametrize(
    ("text", "end", "expected"),
    [
        ("-", False, ranges.FIRST),
        ("+", True, ranges.LAST),
        ("1700000000000-5", False, (1700000000000, 5)),
        ("1700000000000", False, (1700000000000, 0)),
        ("1700000000000", True, (1700000000000, ranges.MAX_SEQ)),
        ("2023-11-14T22:13:20Z", False, (1700000000000, 0)),
    ],
)
def test_ids_parse(text: str, end: bool, expected: ranges.Id) -> None:
    assert ranges.parse_id(text, end=end) == expected


def test_a_bad_id_names_the_option() -> None:
    with pytest.raises(Misconfigured, match="option start='yesterday'"):
        ranges.parse_id("yesterday", end=False, option="start")


def test_splits_cover_the_range_without_overlap() -> None:
    extent = ranges.Extent(length=1000, first=(1000, 0), last=(1999, 3))
    splits = ranges.plan(extent, ranges.FIRST, ranges.LAST, size=300)
    assert len(splits) == 4
    assert splits[0][0] == "1000-0" and splits[-1][1] == "1999-3"
    for (_, end), (start, _) in itertools.pairwise(splits):
        assert int(end.split("-")[0]) + 1 == int(start.split("-")[0])
    # Bounded by start/end, and nothing for an empty partition or range.
    assert ranges.plan(extent, (1500, 0), (1500, 9), size=300) == [("1500-0", "1500-9")]
    assert ranges.plan(extent, (3000, 0), ranges.LAST, size=300) == []
    assert ranges.plan(ranges.Extent(0, None, None), ranges.FIRST, ranges.LAST, 10) == []


def test_the_embedded_url_is_resolved_to_the_server_it_starts(tmp_path) -> None:
    from runnel_redis import embedded

    url = f"redis+embedded://{tmp_path}"
    try:
        target = Target.from_options({"stream": "tests.spark.streams:pings", "url": url})
        target.prepare(writing=False)
        assert target.log is not None
        # Executors get the log by pickle: as the server's redis:// URL, not the embedded one.
        shipped = pickle.loads(pickle.dumps(target))
        assert shipped.sync_log().url == embedded.ensure(url).url
        assert shipped.sync_log().url.startswith("redis://127.0.0.1:")
    finally:
        embedded.stop(embedded.state_dir(url))
    with pytest.raises(Misconfigured, match="no transport for kafka://"):
        Target.from_options({"stream": "tests.spark.streams:pings", "url": "kafka://h"}).prepare(
            writing=False
        )


def test_partition_column_type() -> None:
    from runnel_spark.schema import stream_schema
    from tests.spark import streams

    schema = stream_schema(streams.pings)
    assert [(f.name, f.dataType) for f in schema.fields[-3:]] == [
        ("_partition", IntegerType()),
        ("_id", StringType()),
        ("_timestamp", TimestampType()),
    ]


def test_a_bad_row_shows_bytes_readably() -> None:
    from runnel_spark.writer import BadRow, Encoder
    from tests.spark import streams

    encode = Encoder(streams.pings_out)
    with pytest.raises(BadRow) as caught:
        encode({"key": b"\x00\xff", "n": 1, "extra": b"plain text"}, "row 1")
    message = str(caught.value)
    assert '"key": "0x00ff"' in message and '"extra": "plain text"' in message
    assert "b'" not in message
