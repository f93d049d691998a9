"""Avro schemas derived from Record classes, and the value conversions Avro needs.

``derive(Record)`` maps the record's neutral tree (:mod:`runnel.record_types`) and returns
the schema together with two compiled conversions: ``encode`` (what
``model_dump(mode="python")`` gives -> what fastavro writes) and ``decode`` (what fastavro
reads -> what pydantic validates). Most fields need
neither, and then no per-event work is done for them.
"""

from __future__ import annotations

import builtins
import dataclasses
import datetime
import decimal
import enum
import functools
import re
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from runnel import record_types as rt
from runnel.exceptions import Misconfigured

Convert = Callable[[Any], Any] | None
"""A conversion of one value; ``None`` when the value passes unchanged."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

TIMESTAMP = {"type": "long", "logicalType": "timestamp-micros"}
DATE = {"type": "int", "logicalType": "date"}
TIME = {"type": "long", "logicalType": "time-micros"}
UUID = {"type": "string", "logicalType": "uuid"}


@dataclasses.dataclass
class Derived:
    schema: dict[str, Any]
    encode: Convert
    decode: Convert


@dataclasses.dataclass
class _Plan:
    schema: Any
    encode: Convert = None
    decode: Convert = None
    # In a union with several branches: does a value belong to this branch? (before
    # encoding, and as read by fastavro). Only branches with conversions need them.
    is_python: Callable[[Any], bool] | None = None
    is_avro: Callable[[Any], bool] | None = None


def derive(record: type[BaseModel]) -> Derived:
    """The Avro schema of ``record`` (a record schema named after the class)."""
    plan = _Builder().model(rt.walk(record))
    assert isinstance(plan.schema, dict)
    return Derived(plan.schema, plan.encode, plan.decode)


SCALARS: dict[type, Any] = {
    bool: "boolean",
    int: "long",
    float: "double",
    str: "string",
    bytes: "bytes",
    datetime.datetime: TIMESTAMP,
    datetime.date: DATE,
    datetime.time: TIME,
    uuid.UUID: UUID,
}


class _Builder:
    """Maps the neutral tree of a record (:mod:`runnel.record_types`) to Avro."""

    def __init__(self) -> None:
        # Named types defined so far: an Avro name may be defined once per schema, later
        # uses refer to it by name (this is also what makes recursive records work).
        self.named: dict[str, type] = {}
        self.plans: dict[type, _Plan] = {}

    def _claim(self, cls: type, where: str) -> bool:
        """Reserve ``cls``'s Avro name; False if it is defined already (refer to it)."""
        name = cls.__name__
        if name in self.named:
            if self.named[name] is not cls:
                raise Misconfigured(
                    f"{where}: two different types are named {name!r}; Avro needs unique names"
                )
            return False
        self.named[name] = cls
        return True

    def model(self, node: rt.Nested | rt.Recursive) -> _Plan:
        cls = node.cls
        names = set(cls.model_fields)

        def is_record(value: Any) -> bool:
            return isinstance(value, dict) and value.keys() == names

        if isinstance(node, rt.Recursive) or not self._claim(cls, node.where):
            plan = self.plans[cls]
            # Refer by name; conversions are looked up late, as the model may be unfinished.
            late = _Plan(cls.__name__, _late(plan, "encode"), _late(plan, "decode"))
            late.is_python = late.is_avro = is_record
            return late
        plan = _Plan(None, is_python=is_record, is_avro=is_record)
        self.plans[cls] = plan
        fields = []
        encoders: list[tuple[str, Callable[[Any], Any]]] = []
        decoders: list[tuple[str, Callable[[Any], Any]]] = []
        for item in node.fields:
            name, default, required = item.name, item.default, item.required
            field_plan = self.type(item.type, default, required)
            field: dict[str, Any] = {"name": name, "type": field_plan.schema}
            if not required:
                converted = _default_json(default, field_plan)
                if converted is not _NO_DEFAULT:
                    field["default"] = converted
            if item.description:
                field["doc"] = item.description
            fields.append(field)
            if field_plan.encode is not None:
                encoders.append((name, field_plan.encode))
            if field_plan.decode is not None:
                decoders.append((name, field_plan.decode))
        plan.schema = {"type": "record", "name": cls.__name__, "fields": fields}
        if cls.__doc__ and cls.__module__ != "runnel.record":
            plan.schema["doc"] = " ".join(cls.__doc__.split())
        plan.encode = _fields(encoders)
        plan.decode = _fields(decoders)
        return plan

    def type(self, node: rt.Node, default: Any = None, required: bool = True) -> _Plan:
        where = node.where
        if isinstance(node, rt.Null):
            return _Plan("null")
        if isinstance(node, rt.Union):
            return self.union(node, default, required)
        if isinstance(node, rt.Literal):
            kinds = {type(a) for a in node.values}
            if kinds <= {str}:
                return _Plan("string")
            if kinds <= {int}:
                return _Plan("long")
            shown = ", ".join(map(repr, node.values))
            raise Misconfigured(f"{where}: Avro cannot carry a Literal of {shown}")
        if isinstance(node, rt.Array):
            items = self.type(node.item)
            enc = _each(items.encode)
            plan = _Plan({"type": "array", "items": items.schema}, enc, _each(items.decode))
            plan.is_python = lambda v: isinstance(v, list | tuple | set | frozenset)
            plan.is_avro = lambda v: isinstance(v, list)
            return plan
        if isinstance(node, rt.Map):
            if not (isinstance(node.key, rt.Scalar) and node.key.cls is str):
                raise Misconfigured(f"{where}: Avro maps need str keys (dict[str, X])")
            values = self.type(node.value)
            plan = _Plan({"type": "map", "values": values.schema})
            plan.encode = _values(values.encode)
            plan.decode = _values(values.decode)
            plan.is_python = plan.is_avro = lambda v: isinstance(v, dict)
            return plan
        if isinstance(node, rt.Nested | rt.Recursive):
            return self.model(node)
        if isinstance(node, rt.Enum):
            return self.enum(node.cls, where)
        if isinstance(node, rt.Scalar):
            schema = SCALARS[node.kind]
            plan = _Plan(dict(schema) if isinstance(schema, dict) else schema)
            if node.kind in _ZONE_CHECKS:  # what fastavro would change, refused instead
                plan.encode, plan.is_python = _ZONE_CHECKS[node.kind]
            return plan
        if isinstance(node, rt.Decimal):
            if node.digits is None or node.places is None:
                # Without a declared scale the exact value is kept as text.
                return _Plan("string", str, None, lambda v: isinstance(v, decimal.Decimal))
            schema = {"type": "bytes", "logicalType": "decimal", "precision": node.digits}
            schema["scale"] = node.places
            return _Plan(schema)
        assert isinstance(node, rt.Opaque)
        if node.reason == "fixed-tuple":
            raise Misconfigured(f"{where}: use tuple[X, ...]; Avro arrays have one item type")
        if node.reason == "no-item-type":
            raise Misconfigured(f"{where}: give the item type (list[int], say) for Avro")
        if node.reason == "class":
            raise Misconfigured(f"{where}: Avro cannot carry {node.annotation.__name__} values")
        raise Misconfigured(f"{where}: Avro cannot carry {node.annotation!r}; give a concrete type")

    def union(self, node: rt.Union, default: Any, required: bool) -> _Plan:
        branches = [self.type(b) for b in node.branches]
        schemas = [b.schema for b in branches]
        # A default must match the union's first branch.
        if node.nullable:
            if not required and default is not None:
                schemas = [*schemas, "null"]
            else:
                schemas = ["null", *schemas]
        if len(branches) == 1:
            inner = branches[0]
            enc = None if inner.encode is None else _unless_none(inner.encode)
            dec = None if inner.decode is None else _unless_none(inner.decode)
            return _Plan(schemas, enc, dec)
        # Records before maps: a dict is a record's when its keys are that record's fields.
        ordered = sorted(
            branches, key=lambda b: isinstance(b.schema, dict) and b.schema.get("type") == "map"
        )
        return _Plan(
            schemas,
            _by_branch([(b.is_python, b.encode) for b in ordered]),
            _by_branch([(b.is_avro, b.decode) for b in ordered]),
        )

    def enum(self, cls: builtins.type[enum.Enum], where: str) -> _Plan:
        # The values are the symbols when they can be; otherwise the member names are.
        by_value = _symbols_are_values(cls)
        symbols = [str(m.value) if by_value else m.name for m in cls]
        to_symbol = {m: s for m, s in zip(cls, symbols, strict=True)}
        to_member = {s: m for m, s in to_symbol.items()}
        schema: Any = {"type": "enum", "name": cls.__name__, "symbols": symbols}
        if not self._claim(cls, where):
            schema = cls.__name__
        if by_value:
            return _Plan(schema, _enum_symbols, None, lambda v: isinstance(v, cls))
        return _Plan(
            schema,
            to_symbol.__getitem__,
            to_member.__getitem__,
            lambda v: isinstance(v, cls),
            lambda v: isinstance(v, str) and v in to_member,
        )


def _instant(value: Any) -> Any:
    """A datetime as ``timestamp-micros`` keeps it: an instant, so it must be aware (a naive
    one would come back as a UTC datetime, which is not equal to it)."""
    if isinstance(value, datetime.datetime) and value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()}")
    return value


def _zoneless(value: Any) -> Any:
    """A time as ``time-micros`` keeps it: without a zone, so it must have none."""
    if isinstance(value, datetime.time) and value.utcoffset() is not None:
        raise ValueError(f"time {value.isoformat()} has a time zone")
    return value


_ZONE_CHECKS: dict[type, tuple[Callable[[Any], Any], Callable[[Any], bool]]] = {
    datetime.datetime: (_instant, lambda v: isinstance(v, datetime.datetime)),
    datetime.time: (_zoneless, lambda v: isinstance(v, datetime.time)),
}


def _late(plan: _Plan, which: str) -> Convert:
    def convert(value: Any) -> Any:
        fn = getattr(plan, which)
        return value if fn is None else fn(value)

    return convert


def _fields(converters: list[tuple[str, Callable[[Any], Any]]]) -> Convert:
    if not converters:
        return None

    def convert(value: Any) -> Any:
        if value is None:
            return None
        value = dict(value)
        for name, fn in converters:
            if name in value:
                value[name] = fn(value[name])
        return value

    return convert


def _each(fn: Convert) -> Convert:
    if fn is None:
        return None
    return lambda value: None if value is None else [fn(v) for v in value]


def _values(fn: Convert) -> Convert:
    if fn is None:
        return None
    return lambda value: None if value is None else {k: fn(v) for k, v in value.items()}


def _by_branch(branches: list[tuple[Callable[[Any], bool] | None, Convert]]) -> Convert:
    """Convert a union's value with the conversion of the branch it belongs to."""
    found = [(test, fn) for test, fn in branches if test is not None and fn is not None]
    if not found:
        return None

    def convert(value: Any) -> Any:
        for test, fn in found:
            if test(value):
                return fn(value)
        return value

    return convert


def _unless_none(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else fn(value)


def _enum_symbols(value: Any) -> Any:
    """Enum members as their Avro symbol; anything else unchanged."""
    if isinstance(value, enum.Enum):
        return value.value if _symbols_are_values(type(value)) else value.name
    return value


@functools.cache
def _symbols_are_values(cls: type[enum.Enum]) -> bool:
    return all(isinstance(m.value, str) and _NAME.match(m.value) for m in cls)


_NO_DEFAULT = object()
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _default_json(value: Any, plan: _Plan) -> Any:
    """A field default as Avro writes defaults in JSON; ``_NO_DEFAULT`` if it cannot be."""
    try:
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="python")
        if plan.encode is not None:
            value = plan.encode(value)
        schema = plan.schema
        if isinstance(schema, list):  # a union: the default belongs to the first branch
            schema = schema[0]
        return _json_value(value, schema)
    except Exception:
        return _NO_DEFAULT


def _json_value(value: Any, schema: Any) -> Any:
    if value is None:
        return None
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    if logical == "timestamp-micros":
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return (value - _EPOCH) // datetime.timedelta(microseconds=1)
    if logical == "date":
        return (value - datetime.date(1970, 1, 1)).days
    if logical == "time-micros":
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + (
            value.microsecond
        )
    if logical == "uuid":
        return str(value)
    if logical == "decimal":
        unscaled = int(decimal.Decimal(value).scaleb(schema["scale"]))
        size = max(1, (unscaled.bit_length() + 8) // 8)
        return unscaled.to_bytes(size, "big", signed=True).decode("latin-1")
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, enum.Enum):
        raise TypeError("enum default not converted")
    if isinstance(value, list | dict | str | int | float | bool):
        return value
    raise TypeError(f"no JSON form for {value!r}")


def unwritten(reader: dict[str, Any], writer: dict[str, Any]) -> Convert:
    """Remove, after decoding, the reader's fields that ``writer`` did not have.

    fastavro fills such fields with the Avro default in its stored form (microseconds for
    a datetime, raw bytes for a decimal); removing them lets pydantic apply the record's
    own default, which is where the Avro default came from.
    """
    readers = _named(reader, {})
    writers = _named(writer, {})
    plans: dict[tuple[str, str], Any] = {}

    def plan(r: Any, w: Any) -> Convert:
        r = readers.get(r, r) if isinstance(r, str) else r
        w = writers.get(w, w) if isinstance(w, str) else w
        if isinstance(r, list) or isinstance(w, list):
            rs = [readers.get(x, x) if isinstance(x, str) else x for x in _listed(r)]
            ws = [writers.get(x, x) if isinstance(x, str) else x for x in _listed(w)]
            records = [
                (a, b)
                for a in rs
                for b in ws
                if _record_name(a) and _record_name(a) == _record_name(b)
            ]
            if len(records) != 1:
                return None
            inner = plan(*records[0])
            return None if inner is None else (lambda v: inner(v) if isinstance(v, dict) else v)
        if not isinstance(r, dict) or not isinstance(w, dict) or r.get("type") != w.get("type"):
            return None
        kind = r["type"]
        if kind == "array":
            return _each(plan(r["items"], w["items"]))
        if kind == "map":
            return _values(plan(r["values"], w["values"]))
        if kind != "record" or r.get("name") != w.get("name"):
            return None
        key = (r["name"], w["name"])
        if key in plans:  # a recursive record: use the plan being built
            return lambda v: plans[key](v) if plans[key] else v
        plans[key] = None
        written = {f["name"]: f for f in w["fields"]}
        drop = [f["name"] for f in r["fields"] if f["name"] not in written]
        nested = [
            (f["name"], fn)
            for f in r["fields"]
            if f["name"] in written and (fn := plan(f["type"], written[f["name"]]["type"]))
        ]
        if not drop and not nested:
            return None

        def convert(value: Any) -> Any:
            for name in drop:
                value.pop(name, None)
            for name, fn in nested:
                if value.get(name) is not None:
                    value[name] = fn(value[name])
            return value

        plans[key] = convert
        return convert

    return plan(reader, writer)


def _listed(schema: Any) -> list[Any]:
    return schema if isinstance(schema, list) else [schema]


def _record_name(schema: Any) -> str | None:
    if isinstance(schema, dict) and schema.get("type") == "record":
        return schema.get("name")
    return None


def _named(schema: Any, found: dict[str, Any]) -> dict[str, Any]:
    """Every named type defined in ``schema``, by name."""
    if isinstance(schema, list):
        for branch in schema:
            _named(branch, found)
    elif isinstance(schema, dict):
        if schema.get("type") in ("record", "enum", "fixed") and "name" in schema:
            found[schema["name"]] = schema
        for field in schema.get("fields", []):
            _named(field["type"], found)
        for key in ("items", "values"):
            if key in schema:
                _named(schema[key], found)
    return found
