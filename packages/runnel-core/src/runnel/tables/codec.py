"""How a table's keys and values become the bytes a store keeps.

Keys are a stream's partition keys (text, numbers, tuples of them): stored as JSON, so the
same key is the same bytes on every worker, and the CLI can show and look them up. Values
go through the table's serializer (JSON unless told otherwise); a table declared with a
``record`` type stores records and reads them back as that type.
"""

from __future__ import annotations

from typing import Any

import orjson

from runnel.codecs.fidelity import JSON, ORJSON, check, problem
from runnel.codecs.serializers import JSONSerializer
from runnel.exceptions import TableError
from runnel.interfaces import Serializer
from runnel.record import Record

dumps = orjson.dumps

IMMUTABLE = (int, float, str, bytes, bool, tuple, frozenset, type(None))
SCALARS = frozenset({int, float, str, bool, type(None)})
"""Types whose values the JSON serializer writes as orjson does, with nothing around."""


def deferrable(value: Any) -> bool:
    """Whether every serializer surely encodes ``value`` as it is: a 64-bit int, a finite
    float, a bool, None or ASCII text (``str.isascii`` is constant time). Others, and
    every value of a table of records, are encoded when their event's changes are sealed,
    so that one that cannot be fails that event (:meth:`TableView.write` inlines this)."""
    kind = type(value)
    if kind is int:
        return -0x8000000000000000 <= value <= 0xFFFFFFFFFFFFFFFF
    if kind is float:
        return not value - value  # NaN or an infinity minus itself is NaN
    if kind is str:
        return value.isascii()
    return kind is bool or value is None


def encode_key(key: Any) -> bytes:
    try:
        data = orjson.dumps(key, option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:
        found = problem(key, ORJSON)
        raise TableError(
            f"a table key must be JSON (text, a number, a tuple of them): {key!r}"
            + (f": {found}" if found else "")
        ) from exc
    if data.find(b"null") >= 0 and (found := problem(key, ORJSON)) is not None:
        # orjson writes NaN as null: the key would be None's (or another NaN's)
        raise TableError(f"a table key must be JSON: {key!r}: {found}")
    return data


def kept_key(key: Any) -> bytes:
    """:func:`encode_key` as a copy to keep: orjson's bytes hold a 4 KiB buffer each."""
    return bytes(memoryview(encode_key(key)))


def decode_key(raw: bytes) -> Any:
    """A stored key as Python (a tuple key comes back as a list)."""
    return orjson.loads(raw)


class RawKey(bytes):
    """A key stored as these bytes, not JSON: a windowed table's own entries (its
    watermark), which no key of the stream can be mistaken for."""


def store_key(key: Any) -> bytes:
    return key if type(key) is RawKey else encode_key(key)


TakenWrites = dict[str, dict[bytes, bytes | None]]
"""Table name -> stored key -> encoded value (None: delete it), as a commit takes them."""
TakenDeadlines = dict[str, dict[bytes, float | None]]
"""Table name -> stored key -> its deadline (None: drop it), as a commit takes them."""


class Encoded:
    """A sealed value already encoded (a mutable one: later changes must not reach it)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class ValueCodec:
    """A table's values to bytes and back."""

    def __init__(self, serializer: Serializer, record: type[Record] | None) -> None:
        self.serializer = serializer
        self.record = record
        compressor = serializer.compressor
        self._compress = compressor.compress if compressor is not None else None
        self._decompress = compressor.decompress if compressor is not None else None
        self.plain_json = (
            isinstance(serializer, JSONSerializer)
            and type(serializer).dumps is JSONSerializer.dumps
            and compressor is None
            and record is None
        )
        """Numbers and text then encode with orjson directly (a counter's every commit)."""

    def encode(self, value: Any) -> bytes:
        try:
            if self.plain_json and type(value) in SCALARS:
                try:
                    data = dumps(value)
                except TypeError:  # an int beyond 64 bits (JSON carries it), bad text
                    return self.serializer.dumps(value)
                if data == b"null" and value is not None:
                    check(value, JSON)  # NaN or an infinity, which orjson writes as null
                return data
            if self.record is not None:
                if not isinstance(value, self.record):
                    value = self.record.model_validate(value)
                data = self.serializer.dumps_record(value)
            elif isinstance(value, Record):
                data = self.serializer.dumps(value.model_dump(mode=self.serializer.dump_mode))
            else:
                data = self.serializer.dumps(value)
        except Exception as exc:  # the serializer (a plugin) or the value
            raise TableError(f"cannot encode the table value {value!r}: {exc}") from exc
        return self._compress(data) if self._compress is not None else data

    def frozen(self, value: Any) -> bool:
        """Whether a value cannot change once written and surely encodes, so that sealing
        it may leave the encoding to the commit (and encode only the last of several
        changes): a value that cannot be encoded must fail the event that wrote it, not
        the commit."""
        return self.record is None and deferrable(value)

    def decode(self, data: bytes) -> Any:
        if self._decompress is not None:
            data = self._decompress(data)
        if self.record is not None:
            return self.serializer.loads_record(self.record, data)
        return self.serializer.loads(data)
