"""JSON (orjson) and msgpack serializers."""

from __future__ import annotations

import datetime
import decimal
import enum
import functools
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from runnel.codecs.fidelity import (
    JSON,
    MSGPACK,
    NULL_MARKS,
    check_finite,
    null_marks,
    refused,
)
from runnel.interfaces import Compressor, Serializer

if TYPE_CHECKING:
    from runnel.record import Record


@functools.cache
def _pydantic_core() -> Any:
    """pydantic_core, imported on first use, not with the built-in codecs, which every
    ``runnel`` command registers (``runnel --help`` stays quick)."""
    import pydantic_core

    return pydantic_core


class JSONSerializer(Serializer):
    """UTF-8 JSON via orjson; what runnel 0.1 wrote by default, so old data stays readable.

    JSON has no NaN or infinity (orjson and pydantic write ``null`` for them): a value
    holding one is refused with :class:`~runnel.exceptions.EncodeError`, found only when
    the output holds a ``null``. Integers of any size are written and read back exactly.
    """

    name = "json"

    def __init__(self, compressor: Compressor | None = None) -> None:
        self.compressor = compressor

    def dumps(self, value: Any) -> bytes:
        try:
            data = orjson.dumps(value)
        except TypeError as exc:
            if "64-bit" not in str(exc):
                raise refused(value, JSON, exc) from exc
            data = _pydantic_core().to_json(value)  # any int, exactly; the rest as orjson does
        if data.find(b"null") >= 0:  # (`in` tries the needle as an int first: slower)
            check_finite(value)  # a None, or a NaN written as null
        return data

    def loads(self, value: bytes) -> Any:
        # pydantic's parser, which reads integers beyond 64 bits exactly (orjson reads them
        # as floats), a little slower than orjson's.
        return _pydantic_core().from_json(value)

    # pydantic reads and writes JSON itself, in one pass and to the same bytes. A subclass
    # with its own dumps/loads gets the general path, so its format is respected.

    def dumps_record(self, record: Record) -> bytes:
        if type(self).dumps is not JSONSerializer.dumps:
            return super().dumps_record(record)
        try:
            data = record.__pydantic_serializer__.to_json(record)
        except Exception as exc:  # pydantic's PydanticSerializationError
            raise refused(record, JSON, exc) from exc
        # A NaN would be a null where a float was (every event of a JSON stream passes
        # here): nothing to do for a record without floats; else a scan of the bytes for
        # each float field's key and null (after one for a null at all, when there are
        # several), and a walk only if one is found.
        marks = NULL_MARKS.get(type(record))
        if marks is None:
            marks = null_marks(type(record))
        if marks and (len(marks) == 1 or data.find(b"null") >= 0):
            for mark in marks:
                if data.find(mark) >= 0:
                    check_finite(record)
                    break
        return data

    def loads_record(self, record: type[Record], data: bytes) -> Record:
        if type(self).loads is not JSONSerializer.loads:
            return super().loads_record(record, data)
        return record.__pydantic_validator__.validate_json(data)

    def __repr__(self) -> str:
        return f"JSONSerializer(compressor={self.compressor!r})"


def _plain(value: Any) -> Any:
    """What msgpack cannot carry natively, as pydantic will read it back."""
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, int):
        raise OverflowError(f"{value} is beyond the 64-bit integers msgpack carries")
    raise TypeError(f"cannot serialize {type(value).__name__} with msgpack")


class MsgpackSerializer(Serializer):
    """msgpack: smaller than JSON and faster to decode, with native bytes, NaN and the
    infinities; integers from -2**63 to 2**64 - 1 (others are refused with
    :class:`~runnel.exceptions.EncodeError`, naming the field)."""

    name = "msgpack"
    dump_mode = "python"

    def __init__(self, compressor: Compressor | None = None) -> None:
        # Imported by the first msgpack serializer made, not with the built-in codecs,
        # which every `runnel` command registers.
        import msgpack

        self.compressor = compressor
        self._msgpack = msgpack

    def dumps(self, value: Any) -> bytes:
        try:
            return self._msgpack.packb(value, use_bin_type=True, default=_plain)
        except (TypeError, ValueError, OverflowError) as exc:
            raise refused(value, MSGPACK, exc) from exc

    def loads(self, value: bytes) -> Any:
        return self._msgpack.unpackb(value, raw=False)

    def __repr__(self) -> str:
        return f"MsgpackSerializer(compressor={self.compressor!r})"
