"""Finding the value a format would store as something else, or cannot store, by its place.

A codec must give back what it was given or refuse it where it is given: a NaN that JSON
writes as ``null`` would come back as None (or fail to validate, and stop a processor).
Nothing here runs on the common path but a lookup: the serializers call :func:`refused`
when encoding failed, and JSON's :func:`check_finite` only when a ``null`` stands where
a float may have been (:func:`null_marks`). Both walk the value and name the first field
at fault, such as ``items[2].price``.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import math
import types
import typing
import uuid
from typing import Any

from runnel.exceptions import EncodeError


@dataclasses.dataclass(frozen=True)
class Format:
    """What a format cannot carry, and how to say so."""

    name: str
    nan: bool
    """Whether it carries NaN and the infinities."""
    ints: tuple[int, int] | None
    """The integers it carries (None: any)."""
    binary: bool
    """Whether it carries bytes that are not UTF-8."""
    zones: bool = True
    """Whether a datetime's time zone (or its lack) and a time's come back as given;
    else datetimes must be aware (an instant) and times naive."""


JSON = Format("JSON", nan=False, ints=None, binary=False)
ORJSON = Format("JSON", nan=False, ints=(-(2**63), 2**64 - 1), binary=False)
"""JSON written by orjson, which has 64-bit integers only."""
MSGPACK = Format("msgpack", nan=True, ints=(-(2**63), 2**64 - 1), binary=True)
AVRO = Format("Avro", nan=True, ints=(-(2**63), 2**63 - 1), binary=True, zones=False)


def problem(value: Any, fmt: Format) -> str | None:
    """``"items[2].price: nan ..."``: the first value inside ``value`` that ``fmt`` would
    not give back as it is, with its place; None if there is none."""
    found = _find(value, fmt, 0)
    if found is None:
        return None
    path, what = found
    place = "".join(reversed(path)).lstrip(".")
    return f"{place}: {what}" if place else what


def check(value: Any, fmt: Format) -> None:
    """Raise :class:`EncodeError` naming what in ``value`` ``fmt`` cannot carry, if any."""
    found = problem(value, fmt)
    if found is not None:
        raise EncodeError(found)


def refused(value: Any, fmt: Format, cause: BaseException) -> EncodeError:
    """The error for ``value`` that ``fmt`` failed to encode: naming the field at fault
    when it is one of those :func:`problem` knows, else saying what the encoder said."""
    return EncodeError(problem(value, fmt) or f"{type(cause).__name__}: {cause}")


def check_finite(value: Any) -> None:
    """For JSON output that holds a ``null``: raise :class:`EncodeError` if a NaN or an
    infinity in ``value`` became it (a None is the usual ``null``). The walk looks only
    at what can hold a float: of a record, the fields whose type can (none, for most)."""
    if _nonfinite(value):
        dumped = value.model_dump() if hasattr(value, "model_dump") else value
        raise EncodeError(
            problem(value, JSON)
            or problem(dumped, JSON)
            or "a NaN or an infinity, which JSON has not (msgpack carries them)"
        )


NULL_MARKS: dict[type, tuple[bytes, ...]] = {}
"""Per record type, what in its JSON (as pydantic writes it) may be a NaN or an infinity
written as null: ``"price":null`` after the key of each float field, ``null`` itself for
records with floats in lists, dicts or ``Any`` (anywhere), nothing for records that hold
no float (most). Read by :func:`null_marks`, once per type."""


def null_marks(cls: type) -> tuple[bytes, ...]:
    """:data:`NULL_MARKS` of record type ``cls``, read the first time."""
    found = NULL_MARKS.get(cls)
    if found is None:
        marks = _null_marks(cls, set())
        found = NULL_MARKS[cls] = (b"null",) if marks is None else marks
    return found


def _null_marks(cls: type, seen: set[type]) -> tuple[bytes, ...] | None:
    names = _float_fields(cls)
    config = getattr(cls, "model_config", {})
    if (
        names is None
        or names is _DUMP
        or config.get("extra") == "allow"
        or config.get("alias_generator") is not None
    ):
        return None
    if cls in seen:
        return ()
    seen.add(cls)
    fields = cls.__pydantic_fields__  # type: ignore[attr-defined]
    marks: set[bytes] = set()
    for name in names:
        info = fields[name]
        kinds = _branches(info.annotation)
        if kinds <= {float, type(None)}:
            keys = {name, info.alias, info.serialization_alias}
            marks.update(b'"%s":null' % k.encode() for k in keys if isinstance(k, str))
            continue
        inner = {k for k in kinds if k is not type(None)}
        if len(inner) != 1 or not isinstance(record := inner.pop(), type):
            return None
        nested = _null_marks(record, seen)
        if nested is None:
            return None
        marks.update(nested)
    return tuple(sorted(marks))


def _branches(annotation: Any) -> set[Any]:
    """The types a field may hold: its union's branches, a list's or dict's items (a
    record in a container is found by its own keys); anything else as it is."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return set().union(*(_branches(a) for a in typing.get_args(annotation)))
    if origin in (list, tuple, set, frozenset) or origin is dict:
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        if origin is dict:
            args = args[1:]
        found = set().union(*(_branches(a) for a in args)) if args else {Any}
        # A float straight in a container is written as a bare null: no key marks it.
        return {Any} if float in found else found
    return {annotation}


def _nonfinite(value: Any) -> bool:
    """Whether ``value`` holds a NaN or an infinity (loops, not generators: this runs for
    every JSON event holding a None whose record has a float field)."""
    kind = type(value)
    if kind is float:
        return value - value != 0  # NaN, or an infinity minus itself (NaN)
    if kind is list or kind is tuple:
        items: Any = value
    elif kind is dict:
        items = value.values()
    else:
        names = _FLOAT_FIELDS.get(kind, _UNSEEN)
        if names is _UNSEEN:
            names = _FLOAT_FIELDS[kind] = _float_fields(kind)
        if names is None:  # not a record
            if kind is str or kind is int or value is None:
                return False
            if isinstance(value, float):
                return not math.isfinite(value)
            if isinstance(value, list | tuple | set | frozenset):
                return _any_nonfinite(value)
            if isinstance(value, dict):
                return _any_nonfinite(value.values())
            return False
        if names is _DUMP:
            return _nonfinite(value.model_dump())
        extra = value.__pydantic_extra__
        if extra and _any_nonfinite(extra.values()):
            return True
        fields = value.__dict__
        items = [fields.get(name) for name in names]
    return _any_nonfinite(items)


def _any_nonfinite(items: Any) -> bool:
    for item in items:
        if type(item) is float:
            if item - item != 0:
                return True
        elif item is not None and _nonfinite(item):
            return True
    return False


_UNSEEN: Any = object()
_FLOAT_FIELDS: dict[type, tuple[str, ...] | None] = {}
"""Per type: None if it is not a pydantic model, else the names of its fields whose
annotation can hold a float (read once)."""
_NO_FLOAT: tuple[type, ...] = (
    str, int, bytes, bytearray, type(None), datetime.date, datetime.time,
    datetime.timedelta, decimal.Decimal, uuid.UUID, enum.Enum,
)  # fmt: skip


def _float_fields(cls: type) -> tuple[str, ...] | None:
    if cls in _FLOAT_FIELDS:
        return _FLOAT_FIELDS[cls]
    fields = getattr(cls, "__pydantic_fields__", None)
    if not isinstance(fields, dict):
        return None
    _BUSY.add(cls)
    try:
        decorators = getattr(cls, "__pydantic_decorators__", None)
        if (
            decorators is not None
            and (decorators.field_serializers or decorators.model_serializers)
        ) or any(
            _serializes(info.annotation) or not all(_plain_constraint(m) for m in info.metadata)
            for info in fields.values()
        ):
            found = _DUMP  # its own serializers may write anything: walk what they write
        else:
            found = tuple(name for name, info in fields.items() if _may_hold_float(info.annotation))
    finally:
        _BUSY.discard(cls)
    _FLOAT_FIELDS[cls] = found
    return found


_DUMP = ("",)
"""The fields of a record that serializes (some of) its values itself: what to walk is
its ``model_dump()``."""


def _serializes(annotation: Any) -> bool:
    """Whether ``annotation`` holds an ``Annotated`` serializer or validator anywhere."""
    if typing.get_origin(annotation) is typing.Annotated:
        _, *extra = typing.get_args(annotation)
        if not all(_plain_constraint(e) for e in extra):
            return True
    return any(_serializes(a) for a in typing.get_args(annotation))


_BUSY: set[type] = set()
"""Records whose fields are being read (a recursive one may hold floats)."""


def _may_hold_float(annotation: Any) -> bool:
    """Whether a value of ``annotation`` can be or hold a float (when unsure: yes)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return any(isinstance(a, float) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        return _may_hold_float(inner) or not all(_plain_constraint(e) for e in extra)
    if origin is not None:
        return any(_may_hold_float(a) for a in typing.get_args(annotation) if a is not Ellipsis)
    if isinstance(annotation, type):
        if issubclass(annotation, float) or annotation in _BUSY:
            return True
        if issubclass(annotation, _NO_FLOAT):
            return False
        found = _float_fields(annotation)
        if found is not None:  # a record: if any of its fields can
            return bool(found)
    return annotation is not type(None)  # Any, object, a type variable, a class: maybe


def _plain_constraint(item: Any) -> bool:
    """``Annotated`` metadata that only constrains (a ``Field``, ``Strict``...), as opposed
    to a serializer or validator that may turn the value into a float."""
    return not callable(getattr(item, "func", None))


MAX_DEPTH = 200
"""Deeper values are not walked (encoding refuses those itself)."""


def _find(value: Any, fmt: Format, depth: int) -> tuple[list[str], str] | None:
    if isinstance(value, float):
        if not fmt.nan and not math.isfinite(value):
            return [], f"{value!r}: {fmt.name} has no NaN or infinity (msgpack carries them)"
        return None
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if fmt.ints is not None and not fmt.ints[0] <= value <= fmt.ints[1]:
            return [], f"{value} is beyond the 64-bit integers {fmt.name} carries"
        return None
    if isinstance(value, bytes | bytearray):
        if not fmt.binary:
            try:
                bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                return [], (
                    f"{fmt.name} carries bytes only as UTF-8 text: use a str field, or a "
                    "binary serializer such as msgpack or avro"
                )
        return None
    if not fmt.zones and isinstance(value, datetime.datetime | datetime.time):
        return _zone(value, fmt)
    if depth > MAX_DEPTH:
        return None
    fields = getattr(type(value), "__pydantic_fields__", None)  # a record, any pydantic model
    if isinstance(fields, dict):
        items: Any = ((f".{name}", getattr(value, name, None)) for name in fields)
    elif isinstance(value, dict):
        for key in value:
            if isinstance(key, str) and (found := _text(key)) is not None:
                return [f"[{key!r}]"], f"a key: {found[1]}"
        items = ((_key(k), v) for k, v in value.items())
    elif isinstance(value, list | tuple | set | frozenset):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for step, inner in items:
        found = _find(inner, fmt, depth + 1)
        if found is not None:
            found[0].append(step)
            return found
    return None


def _zone(value: datetime.datetime | datetime.time, fmt: Format) -> tuple[list[str], str] | None:
    aware = value.utcoffset() is not None
    if isinstance(value, datetime.datetime) and not aware:
        return [], (
            f"naive datetime {value.isoformat()}: {fmt.name} stores an instant, so give its "
            "time zone (datetime.now(UTC), or .replace(tzinfo=UTC) for a UTC time)"
        )
    if isinstance(value, datetime.time) and aware:
        return [], f"time {value.isoformat()} with a time zone: {fmt.name} keeps none"
    return None


def _text(value: str) -> tuple[list[str], str] | None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return [], (
            f"text with a lone surrogate {value[exc.start]!r} at {exc.start}, which UTF-8 "
            "cannot encode (no serializer stores it)"
        )
    return None


def _key(key: Any) -> str:
    return f".{key}" if isinstance(key, str) and key.isidentifier() else f"[{key!r}]"
