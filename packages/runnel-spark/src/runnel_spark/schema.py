"""Spark schemas derived from Record classes, and the value conversions each way.

``derive(Record)`` maps the record's neutral tree (:mod:`runnel.record_types`) to, per
field, its Spark type and two compiled conversions: ``out`` (a record's attribute -> what
Arrow takes for that Spark type) and ``into`` (what Spark hands a writer -> what pydantic
validates). Most fields need neither, and then nothing is done for them per row.

A field Spark has no type for (``Any``, unions of several types, fixed-length tuples,
dicts with non-``str`` keys, recursive records) becomes a string column holding its JSON,
which is parsed back when written.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import pydantic_core
from pydantic import BaseModel
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from runnel import record_types as rt
from runnel.record import Record
from runnel.stream import Stream

Convert = Callable[[Any], Any] | None
"""A conversion of one value; ``None`` when the value passes unchanged."""

PARTITION, ID, TIMESTAMP = "_partition", "_id", "_timestamp"
META = (PARTITION, ID, TIMESTAMP)
"""Columns every read adds after the record's fields: where each entry came from."""

MAX_PRECISION = 38
"""Spark's widest decimal; a wider ``Decimal`` field is carried as text."""


@dataclasses.dataclass
class Column:
    """How one field of a record is carried in Spark."""

    name: str
    type: DataType
    nullable: bool
    out: Convert = None
    into: Convert = None
    json: bool = False
    """Carried as JSON text: Spark has no type for the field."""


def derive(record: type[BaseModel]) -> list[Column]:
    """The columns of ``record``'s fields, in declaration order."""
    return _columns(rt.walk(record))


def record_schema(record: type[BaseModel]) -> StructType:
    """The Spark schema of ``record``'s fields (no ``_partition``/``_id``/``_timestamp``)."""
    return StructType([StructField(c.name, c.type, c.nullable) for c in derive(record)])


def stream_schema(stream: Stream) -> StructType:
    """The schema of a DataFrame read from ``stream``: the record's fields, then the meta
    columns ``_partition`` (int), ``_id`` (the entry id) and ``_timestamp`` (its time)."""
    schema = record_schema(stream.record)
    schema.add(PARTITION, IntegerType(), False)
    schema.add(ID, StringType(), False)
    schema.add(TIMESTAMP, TimestampType(), False)
    return schema


def into_record(record: type[Record]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A function making one row from Spark (a dict of column values) ready to validate."""
    plans = [(c.name, c.into) for c in derive(record) if c.into is not None]

    def convert(row: dict[str, Any]) -> dict[str, Any]:
        for name, fn in plans:
            if name in row:
                row[name] = fn(row[name])
        return row

    return convert


SCALARS: dict[type, tuple[DataType, Convert]] = {
    bool: (BooleanType(), None),
    int: (LongType(), None),
    float: (DoubleType(), None),
    str: (StringType(), None),
    bytes: (BinaryType(), None),
    datetime.datetime: (TimestampType(), None),
    datetime.date: (DateType(), None),
    datetime.time: (StringType(), datetime.time.isoformat),
    uuid.UUID: (StringType(), str),
}


def _columns(node: rt.Nested) -> list[Column]:
    out = []
    for field in node.fields:
        column = _column(field.type)
        column.name = field.name
        if not field.required and field.default is None:
            column.nullable = True
        out.append(column)
    return out


def _column(node: rt.Node) -> Column:
    """How a node of the record's neutral tree (:mod:`runnel.record_types`) is carried."""
    if isinstance(node, rt.Union):
        if len(node.branches) != 1:
            return _json()
        column = _column(node.branches[0])
        column.nullable = column.nullable or node.nullable
        column.out = _unless_none(column.out)
        column.into = _unless_none(column.into)
        return column
    if isinstance(node, rt.Literal):
        kinds = {type(a) for a in node.values}
        for kind, carried in ((str, StringType()), (bool, BooleanType()), (int, LongType())):
            if kinds == {kind}:
                return Column("", carried, False)
        return _json()
    if isinstance(node, rt.Array):
        item = _column(node.item)
        return Column(
            "",
            ArrayType(item.type, containsNull=item.nullable),
            False,
            _each(item.out),
            _from_text(_each(item.into)),
        )
    if isinstance(node, rt.Map):
        if not (isinstance(node.key, rt.Scalar) and node.key.cls is str):
            return _json()
        value = _column(node.value)
        return Column(
            "",
            MapType(StringType(), value.type, valueContainsNull=value.nullable),
            False,
            _values(value.out),
            _from_text(_map_into(value.into)),
        )
    if isinstance(node, rt.Nested):
        fields = _columns(node)
        struct = StructType([StructField(f.name, f.type, f.nullable) for f in fields])
        return Column("", struct, False, _struct_out(fields), _from_text(_struct_into(fields)))
    if isinstance(node, rt.Enum):
        return _enum(node.cls)
    if isinstance(node, rt.Scalar):
        spark, out = SCALARS[node.kind]
        return Column("", spark, False, out)
    if isinstance(node, rt.Decimal):
        if node.digits is None or node.places is None or node.digits > MAX_PRECISION:
            return Column("", StringType(), False, str)  # the exact value, as text
        return Column("", DecimalType(node.digits, node.places), False)
    # A record inside itself, None alone, Any, fixed tuples, unknown classes.
    return _json()


def _json() -> Column:
    return Column("", StringType(), True, to_json, _parse_json, json=True)


def to_json(value: Any) -> str:
    """A value as JSON text (how a column Spark has no type for carries it)."""
    return pydantic_core.to_json(value).decode()


def _parse_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value  # pydantic says what is wrong with it
    return value


def _enum(cls: type[enum.Enum]) -> Column:
    values = {type(m.value) for m in cls}
    if values == {str}:
        return Column("", StringType(), False, _value)
    if values == {int}:
        return Column("", LongType(), False, _value)
    # Values Spark cannot hold in one column: carry the member names instead.
    members = cls.__members__

    def into(value: Any) -> Any:
        return members.get(value, value) if isinstance(value, str) else value

    return Column("", StringType(), False, _name, into)


def _value(member: Any) -> Any:
    return member.value if isinstance(member, enum.Enum) else member


def _name(member: Any) -> Any:
    return member.name if isinstance(member, enum.Enum) else member


def _unless_none(fn: Convert) -> Convert:
    if fn is None:
        return None
    return lambda value: None if value is None else fn(value)


def _each(fn: Convert) -> Convert:
    if fn is None:
        return None  # Arrow takes tuples and sets as they are
    return lambda value: None if value is None else [fn(v) for v in value]


def _values(fn: Convert) -> Convert:
    if fn is None:
        return None
    return lambda value: None if value is None else {k: fn(v) for k, v in value.items()}


def _map_into(fn: Convert) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        if isinstance(value, list):  # Arrow hands maps over as (key, value) pairs
            value = dict(value)
        if fn is None or not isinstance(value, dict):
            return value
        return {k: fn(v) for k, v in value.items()}

    return convert


def _struct_out(fields: list[Column]) -> Callable[[Any], Any]:
    plans = [(f.name, f.out) for f in fields]

    def convert(value: Any) -> Any:
        if value is None:
            return None
        attrs = value.__dict__
        return {name: attrs[name] if fn is None else fn(attrs[name]) for name, fn in plans}

    return convert


def _struct_into(fields: list[Column]) -> Callable[[Any], Any]:
    plans = [(f.name, f.into) for f in fields if f.into is not None]

    def convert(value: Any) -> Any:
        if not plans or not isinstance(value, dict):
            return value
        value = dict(value)
        for name, fn in plans:
            if name in value:
                value[name] = fn(value[name])
        return value

    return convert


def _from_text(fn: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """Complex values may arrive as JSON text (a CSV column): parse, then convert."""

    def convert(value: Any) -> Any:
        value = _parse_json(value)
        return value if fn is None else fn(value)

    return convert
