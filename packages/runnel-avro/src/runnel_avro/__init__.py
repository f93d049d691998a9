"""Avro for Runnel: schemas derived from records, stored once per stream, evolved safely.

The names below are imported on first use (PEP 562): the plugin is loaded by every
``runnel`` command, and fastavro is slow to import."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "AvroSerializer": "runnel_avro.serializer",
    "Compatibility": "runnel_avro.compatibility",
    "derive": "runnel_avro.schema",
    "load_schema": "runnel_avro.serializer",
    "problems": "runnel_avro.compatibility",
    "schema_fingerprint": "runnel_avro.serializer",
}

if TYPE_CHECKING:
    from runnel_avro.compatibility import Compatibility, problems
    from runnel_avro.schema import derive
    from runnel_avro.serializer import AvroSerializer, load_schema, schema_fingerprint


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'runnel_avro' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


__all__ = [
    "AvroSerializer",
    "Compatibility",
    "derive",
    "load_schema",
    "problems",
    "schema_fingerprint",
]
