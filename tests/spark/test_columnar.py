"""Whole-chunk decoding agrees with pydantic, entry for entry, or steps aside."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pydantic import ConfigDict, Field, ValidationError, field_validator

from runnel import App, Record
from runnel_spark.columnar import chunk_decoder, plain_fields
from tests.spark import streams


class Flat(Record):
    s: str
    i: int
    f: float = 1.5
    b: bool
    o: int | None = None


class Validated(Record):
    s: str

    @field_validator("s")
    @classmethod
    def upper(cls, value: str) -> str:
        return value.upper()


class Constrained(Record):
    i: int = Field(gt=0)


class Aliased(Record):
    s: str = Field(validation_alias="S")


class Strict(Record):
    model_config = ConfigDict(strict=True)
    i: int


class OptionalRequired(Record):
    i: int | None


class Forbidding(Record):
    model_config = ConfigDict(extra="forbid")
    i: int


app = App(name="columnar")
WANTED = {"s": pa.string(), "i": pa.int64(), "f": pa.float64(), "b": pa.bool_(), "o": pa.int64()}


def test_plain_records_are_recognised() -> None:
    assert [f.name for f in plain_fields(Flat) or []] == ["s", "i", "f", "b", "o"]
    assert plain_fields(streams.Ping) is not None
    for record in (Validated, Constrained, Aliased, Strict, OptionalRequired, Forbidding):
        assert plain_fields(record) is None, record
    assert plain_fields(streams.Order) is None  # enums, dates, decimals, nested: per record


def test_only_plain_json_streams_get_a_chunk_decoder() -> None:
    assert chunk_decoder(app.stream("a", record=Flat, partition_by="s"), WANTED) is not None
    gzip = app.stream("b", record=Flat, partition_by="s", serializer="json+gzip")
    assert chunk_decoder(gzip, WANTED) is not None
    msgpack = app.stream("c", record=Flat, partition_by="s", serializer="msgpack")
    assert chunk_decoder(msgpack, WANTED) is None
    assert chunk_decoder(streams.clicks, {}) is None  # primitive
    retyped = {**WANTED, "i": pa.string()}  # a schema asking for other types
    assert chunk_decoder(app.stream("d", record=Flat, partition_by="s"), retyped) is None


GOOD = [
    b'{"s":"a","i":1,"f":2.5,"b":true,"o":3}',
    b'{"s":"\\u00e9\\u0000","i":-9223372036854775808,"f":5,"b":false,"x":{"y":[null]}}',
    b'{"b":true,"i":0,"s":"","o":null,"f":NaN}\r',
]

# Each is a valid JSON document that is not a valid Flat, or one that Arrow reads
# differently from pydantic; the chunk then goes entry by entry.
ODD = [
    b"null",
    b'{"s":"a","i":1,"b":true}',  # f missing: pydantic fills its default
    b"[1]",
    b'"x"',
    b"",
    b"   ",
    b'{"s":"a","i":1,"b":true}\n{"s":"a","i":1,"b":true}',
    b'{"s":"a","i":1,"b":true} {"s":"a","i":1,"b":true}',
    b'\xef\xbb\xbf{"s":"a","i":1,"b":true}',
    b'{"s":5,"i":1,"b":true}',
    b'{"s":"a","i":"5","b":true}',
    b'{"s":"a","i":5.0,"b":true}',
    b'{"s":"a","i":5.5,"b":true}',
    b'{"s":"a","i":1,"b":1}',
    b'{"s":"a","i":1,"b":"true"}',
    b'{"s":"a","i":9223372036854775808,"b":true}',
    b'{"s":"a","i":1,"i":2,"b":true}',
    b'{"s":"a","b":true}',
    b'{"s":null,"i":1,"b":true}',
    b'{"s":"a","i":1,"b":true,"f":null}',
    b'{"s":"a","i":1,"b":true,"f":"1.5"}',
    b'{"s":"a","i":1,"b":true,"f":1e400}',
    b'{"s":"\xff","i":1,"b":true}',
    b'{"s":"a","i":1,"b":true}x',
]


def _pydantic(values: list[bytes]) -> list[dict[str, Any]] | None:
    try:
        return [Flat.model_validate_json(v).model_dump() for v in values]
    except ValidationError:
        return None


@pytest.mark.parametrize("serializer", ["json", "json+gzip"])
@pytest.mark.parametrize("odd", [None, *ODD])
def test_chunks_read_as_pydantic_reads_them(serializer: str, odd: bytes | None) -> None:
    stream = app.stream(f"s.{serializer}", record=Flat, partition_by="s", serializer=serializer)
    decode = chunk_decoder(stream, WANTED)
    assert decode is not None
    values = GOOD + ([odd] if odd is not None else [])
    compressor = stream.serializer.compressor if stream.serializer else None
    stored = [compressor.compress(v) for v in values] if compressor else values
    columns = decode(stored)
    expected = _pydantic(values)
    if columns is None:
        # Only a chunk with an entry pydantic refuses or converts goes entry by entry.
        assert odd is not None
        return
    assert expected is not None, odd
    got = pa.table(columns).to_pylist()
    nan = [r.pop("f") for r in got], [r.pop("f") for r in expected]
    assert got == expected
    assert [repr(x) for x in nan[0]] == [repr(x) for x in nan[1]]


def test_columns_are_the_ones_asked_for() -> None:
    decode = chunk_decoder(app.stream("e", record=Flat, partition_by="s"), {"i": pa.int64()})
    assert decode is not None
    assert list(decode(GOOD) or {}) == ["i"]
