"""JSON (orjson) and msgpack serializers."""

from __future__ import annotations

import datetime
import decimal
import enum
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from runnel.interfaces import Compressor, Serializer

if TYPE_CHECKING:
    from runnel.record import Record


class JSONSerializer(Serializer):
    """UTF-8 JSON via orjson; what runnel 0.1 wrote by default, so old data stays readable."""

    name = "json"

    def __init__(self, compressor: Compressor | None = None) -> None:
        self.compressor = compressor

    def dumps(self, value: Any) -> bytes:
        return orjson.dumps(value)

    def loads(self, value: bytes) -> Any:
        return orjson.loads(value)

    # pydantic reads and writes JSON itself, in one pass and to the same bytes. A subclass
    # with its own dumps/loads gets the general path, so its format is respected.

    def dumps_record(self, record: Record) -> bytes:
        if type(self).dumps is not JSONSerializer.dumps:
            return super().dumps_record(record)
        return record.__pydantic_serializer__.to_json(record)

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
    raise TypeError(f"cannot serialize {type(value).__name__} with msgpack")


class MsgpackSerializer(Serializer):
    """msgpack: smaller than JSON and faster to decode, with native bytes."""

    name = "msgpack"
    dump_mode = "python"

    def __init__(self, compressor: Compressor | None = None) -> None:
        # Imported by the first msgpack serializer made, not with the built-in codecs,
        # which every `runnel` command registers.
        import msgpack

        self.compressor = compressor
        self._msgpack = msgpack

    def dumps(self, value: Any) -> bytes:
        return self._msgpack.packb(value, use_bin_type=True, default=_plain)

    def loads(self, value: bytes) -> Any:
        return self._msgpack.unpackb(value, raw=False)

    def __repr__(self) -> str:
        return f"MsgpackSerializer(compressor={self.compressor!r})"
