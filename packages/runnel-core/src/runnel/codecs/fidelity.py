"""Finding the value a format would store as something else, or cannot store, by its place.

A codec must give back what it was given or refuse it where it is given: a NaN that JSON
writes as ``null`` would come back as None (or fail to validate, and stop a processor).
The serializers call :func:`check` or :func:`refused` on the rare path (JSON's output
holds a ``null``, or encoding failed), so the common path pays nothing; it walks the
value and names the first field at fault, such as ``items[2].price``.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
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
