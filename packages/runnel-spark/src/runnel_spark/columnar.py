"""Decoding a whole chunk of JSON entries in one native call, for records that allow it.

Most streams carry JSON records of plain fields (``str``, ``int``, ``float``, ``bool``).
For those, a chunk's values joined by newlines go through Arrow's JSON reader with the
record's Arrow schema, straight into columns, instead of one pydantic model per entry.
Arrow is stricter than pydantic's lax mode (it refuses ``"5"`` for an int, ``1`` for a
bool, a number for a string), so what it accepts reads as pydantic would read it; a
chunk it refuses, or whose shape is in doubt, is read the per-record way, which converts
what pydantic converts and names a bad entry as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.json as pj

from runnel.codecs.serializers import JSONSerializer
from runnel.record import Record
from runnel.stream import Stream

PLAIN: dict[str, pa.DataType] = {
    "str": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
}
"""pydantic's core schema types read the same by Arrow, and their Arrow types."""

BOM = b"\xef\xbb\xbf"
"""Arrow skips a byte order mark, pydantic refuses it: a chunk holding one goes the slow way."""


@dataclasses.dataclass(frozen=True)
class Plain:
    """A record field Arrow reads as pydantic does."""

    name: str
    type: pa.DataType
    required: bool
    """False when it may be missing or null (``X | None = None``): then null is right."""


def plain_fields(record: type[Record]) -> list[Plain] | None:
    """``record``'s fields if every one is plain and the model validates nothing else
    (no validators, constraints, aliases, strict or string-changing settings); else None.

    Read from pydantic's core schema, accepting only the shapes known to be plain.
    """
    schema: Mapping[str, Any] = getattr(record, "__pydantic_core_schema__", {})
    if (
        schema.get("type") != "model"
        or schema.get("custom_init")
        or schema.get("root_model")
        or "post_init" in schema
        or not _only(schema.get("config", {}), {"title", "extra_fields_behavior"})
        or schema.get("config", {}).get("extra_fields_behavior", "ignore") != "ignore"
    ):
        return None
    inner = schema.get("schema", {})
    if inner.get("type") != "model-fields" or not _only(
        inner, {"type", "fields", "model_name", "computed_fields"}
    ):
        return None
    out = []
    for name, field in inner["fields"].items():
        plain = _plain(name, field)
        if plain is None:
            return None
        out.append(plain)
    return out


def _plain(name: str, field: Mapping[str, Any]) -> Plain | None:
    if field.get("type") != "model-field" or not _only(field, {"type", "schema", "metadata"}):
        return None
    node = field["schema"]
    has_default, default = False, None
    if node.get("type") == "default":
        if not _only(node, {"type", "schema", "default"}):
            return None
        has_default, default, node = True, node["default"], node["schema"]
    nullable = node.get("type") == "nullable"
    if nullable:
        if not _only(node, {"type", "schema"}):
            return None
        node = node["schema"]
    kind = PLAIN.get(node.get("type", ""))
    if kind is None or set(node) != {"type"}:
        return None
    if nullable and not (has_default and default is None):
        return None  # missing must be an error, or give a default: Arrow would say null
    # A missing non-null field reads as null: the chunk then goes the per-record way,
    # which fills the default or says it is missing.
    return Plain(name, kind, not nullable)


def _only(mapping: Mapping[str, Any], allowed: set[str]) -> bool:
    return set(mapping) <= allowed


ChunkDecoder = Callable[[list[bytes]], dict[str, Any] | None]
"""The columns (name -> Arrow array) of a chunk's ``data`` values; None when the chunk
must be read entry by entry."""


def chunk_decoder(stream: Stream, wanted: Mapping[str, pa.DataType]) -> ChunkDecoder | None:
    """A decoder of whole chunks for ``stream``, if its entries are JSON records of plain
    fields and ``wanted`` (the record fields asked for, with their Arrow types) asks for
    them as they are; else None."""
    serializer = stream.serializer
    if (
        stream.record.is_primitive()
        or not isinstance(serializer, JSONSerializer)
        or type(serializer).loads is not JSONSerializer.loads
        or type(serializer).loads_record is not JSONSerializer.loads_record
    ):
        return None
    fields = plain_fields(stream.record)
    if fields is None:
        return None
    for field in fields:
        kind = wanted.get(field.name)
        if kind is not None and kind != field.type:
            return None
    arrow = pa.schema([pa.field(f.name, f.type) for f in fields])
    required = [f.name for f in fields if f.required]
    decompress = serializer.compressor.decompress if serializer.compressor is not None else None

    def decode(values: list[bytes]) -> dict[str, Any] | None:
        if decompress is not None:
            values = [decompress(v) for v in values]
        joined = b"\n".join(values)
        count = len(values)
        # One value per line, each an object: Arrow would take a line holding two objects,
        # skip an empty one, and crashes on a line that is just ``null``.
        if (
            not joined.startswith(b"{")
            or joined.count(b"\n") != count - 1
            or joined.count(b"\n{") != count - 1
            or BOM in joined
        ):
            return None
        try:
            table = pj.read_json(
                pa.BufferReader(joined),
                read_options=pj.ReadOptions(use_threads=False, block_size=len(joined) + 1),
                parse_options=pj.ParseOptions(
                    explicit_schema=arrow, unexpected_field_behavior="ignore"
                ),
            )
        except (pa.ArrowException, ValueError):
            return None
        if table.num_rows != count:
            return None
        for name in required:
            if table.column(name).null_count:
                return None  # missing or null: pydantic fills a default or refuses
        return {name: table.column(name).combine_chunks() for name in wanted}

    return decode
