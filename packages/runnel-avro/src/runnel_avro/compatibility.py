"""Can a reader schema read what a writer schema wrote? Explained field by field.

The decision is Apache Avro's own checker (``avro.compatibility``, the reference rules:
promotions, defaults, enum symbols, unions, names). It reports a whole-schema verdict, so
to name the fields at fault we ask it again for each field of each record pair.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType


class Compatibility(enum.StrEnum):
    """Which way schemas on one stream must stay compatible (transitively, with all)."""

    BACKWARD = "backward"
    """A new schema reads everything written before (upgrade consumers first)."""
    FORWARD = "forward"
    """Everything written before can read the new schema's data (upgrade producers first)."""
    FULL = "full"
    """Both."""
    NONE = "none"
    """No check (each reader must cope with whatever it meets)."""


class DamagedSchema(ValueError):
    """A stored schema that is not a valid Avro schema (it cannot be checked against)."""


def problems(reader: dict[str, Any] | str, writer: dict[str, Any] | str) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer``: ``"Order.total: ..."`` lines.

    Raises :class:`DamagedSchema` if either is not a valid schema.
    """
    try:
        r = _parse(reader)
        w = _parse(writer)
    except Exception as exc:
        raise DamagedSchema(" ".join(f"{type(exc).__name__}: {exc}".split())[:200]) from None
    if _compatible(r, w):
        return []
    return _explain(r, w, r.name if isinstance(r, avro.schema.NamedSchema) else "value")


def _parse(schema: dict[str, Any] | str) -> avro.schema.Schema:
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return avro.schema.parse(text)


def _compatible(reader: avro.schema.Schema, writer: avro.schema.Schema) -> bool:
    result = ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    return result.compatibility is SchemaCompatibilityType.compatible


def _explain(reader: avro.schema.Schema, writer: avro.schema.Schema, path: str) -> list[str]:
    """Narrow an incompatibility down to the fields responsible."""
    if isinstance(reader, avro.schema.RecordSchema) and isinstance(
        writer, avro.schema.RecordSchema
    ):
        if reader.name == writer.name:
            found = []
            written = {f.name: f for f in writer.fields}
            for field in reader.fields:
                source = written.get(field.name) or next(
                    (written[a] for a in (field.props.get("aliases") or []) if a in written),
                    None,
                )
                at = f"{path}.{field.name}"
                if source is None:
                    if not field.has_default:
                        found.append(
                            f"{at}: new field without a default (data written before lacks it)"
                        )
                elif not _compatible(field.type, source.type):
                    found.extend(_explain(field.type, source.type, at))
            if found:
                return found
    if isinstance(reader, avro.schema.ArraySchema) and isinstance(writer, avro.schema.ArraySchema):
        return _explain(reader.items, writer.items, f"{path}[]")
    if isinstance(reader, avro.schema.MapSchema) and isinstance(writer, avro.schema.MapSchema):
        return _explain(reader.values, writer.values, f"{path}{{}}")
    if isinstance(reader, avro.schema.EnumSchema) and isinstance(writer, avro.schema.EnumSchema):
        missing = [s for s in writer.symbols if s not in reader.symbols]
        if missing and reader.name == writer.name:
            return [f"{path}: symbols {missing} were written but are not in the reader's enum"]
    return [f"{path}: {_describe(writer)} cannot be read as {_describe(reader)}"]


def _describe(schema: avro.schema.Schema) -> str:
    if isinstance(schema, avro.schema.NamedSchema):
        return f"{schema.type} {schema.name}"
    if isinstance(schema, avro.schema.UnionSchema):
        return "union [" + ", ".join(_describe(s) for s in schema.schemas) + "]"
    logical = schema.props.get("logicalType")
    return f"{schema.type} ({logical})" if logical else str(schema.type)
