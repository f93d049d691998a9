"""Spark schemas derived from Record classes, and the value conversions each way.

``derive(Record)`` walks the pydantic fields once and returns, per field, its Spark type
and two compiled conversions: ``out`` (a record's attribute -> what Arrow takes for that
Spark type) and ``into`` (what Spark hands a writer -> what pydantic validates). Most
fields need neither, and then nothing is done for them per row.

A field Spark has no type for (``Any``, unions of several types, fixed-length tuples,
dicts with non-``str`` keys, recursive records) becomes a string column holding its JSON,
which is parsed back when written.
"""

from __future__ import annotations

import builtins
import dataclasses
import datetime
import decimal
import enum
import types
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
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


def derive(record: type[BaseModel]) -> list[Column]:
    """The columns of ``record``'s fields, in declaration order."""
    return _Builder().columns(record, record.__name__)


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


class _Builder:
    def __init__(self) -> None:
        # Records being derived: a record inside itself cannot be a Spark struct.
        self.open: set[type] = set()

    def columns(self, cls: type[BaseModel], where: str) -> list[Column]:
        self.open.add(cls)
        try:
            out = []
            for name, info in cls.model_fields.items():
                column = self.type(info.annotation, list(info.metadata), f"{where}.{name}")
                column.name = name
                if not info.is_required() and info.get_default(call_default_factory=True) is None:
                    column.nullable = True
                out.append(column)
            return out
        finally:
            self.open.discard(cls)

    def type(self, annotation: Any, metadata: list[Any], where: str) -> Column:
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin is typing.Annotated:
            return self.type(args[0], [*args[1:], *metadata], where)
        if origin in (typing.Union, types.UnionType):
            inner = [a for a in args if a is not type(None)]
            if len(inner) != 1:
                return _json()
            column = self.type(inner[0], metadata, where)
            column.nullable = column.nullable or len(inner) < len(args)
            column.out = _unless_none(column.out)
            column.into = _unless_none(column.into)
            return column
        if origin is typing.Literal:
            kinds = {type(a) for a in args}
            for kind, spark in ((str, StringType()), (bool, BooleanType()), (int, LongType())):
                if kinds == {kind}:
                    return Column("", spark, False)
            return _json()
        if origin in (list, set, frozenset, tuple, Sequence) or annotation in (list, set, tuple):
            if not args or (origin is tuple and not (len(args) == 2 and args[1] is Ellipsis)):
                return _json()
            item = self.type(args[0], [], f"{where}[]")
            return Column(
                "",
                ArrayType(item.type, containsNull=item.nullable),
                False,
                _each(item.out),
                _from_text(_each(item.into)),
            )
        if origin in (dict, Mapping) or annotation is dict:
            if not args or args[0] is not str:
                return _json()
            value = self.type(args[1], [], f"{where}{{}}")
            return Column(
                "",
                MapType(StringType(), value.type, valueContainsNull=value.nullable),
                False,
                _values(value.out),
                _from_text(_map_into(value.into)),
            )
        if isinstance(annotation, type):
            return self.concrete(annotation, metadata, where)
        return _json()

    def concrete(self, cls: builtins.type, metadata: list[Any], where: str) -> Column:
        if issubclass(cls, BaseModel):
            if cls in self.open:
                return _json()
            fields = self.columns(cls, where)
            struct = StructType([StructField(f.name, f.type, f.nullable) for f in fields])
            return Column("", struct, False, _struct_out(fields), _from_text(_struct_into(fields)))
        if issubclass(cls, enum.Enum):
            return _enum(cls)
        simple: list[tuple[type, DataType]] = [
            (bool, BooleanType()),
            (int, LongType()),
            (float, DoubleType()),
            (str, StringType()),
            (bytes, BinaryType()),
            (datetime.datetime, TimestampType()),
            (datetime.date, DateType()),
        ]
        for kind, spark in simple:
            if issubclass(cls, kind):
                return Column("", spark, False)
        if cls is datetime.time:
            return Column("", StringType(), False, datetime.time.isoformat)
        if cls is uuid.UUID:
            return Column("", StringType(), False, str)
        if cls is decimal.Decimal:
            digits = _constraint(metadata, "max_digits")
            places = _constraint(metadata, "decimal_places")
            if digits is None or places is None or digits > MAX_PRECISION:
                return Column("", StringType(), False, str)  # the exact value, as text
            return Column("", DecimalType(digits, places), False)
        return _json()


def _json() -> Column:
    return Column("", StringType(), True, _to_json, _parse_json)


def _to_json(value: Any) -> str:
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


def _constraint(metadata: list[Any], name: str) -> Any:
    for item in metadata:
        value = getattr(item, name, None)
        if value is not None:
            return value
    return None


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
