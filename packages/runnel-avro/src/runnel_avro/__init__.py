"""Avro for Runnel: schemas derived from records, stored once per stream, evolved safely."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runnel_avro.compatibility import Compatibility, problems
    from runnel_avro.schema import derive
    from runnel_avro.serializer import AvroSerializer, load_schema, schema_fingerprint

__all__ = [
    "AvroSerializer",
    "Compatibility",
    "derive",
    "load_schema",
    "problems",
    "schema_fingerprint",
]

# Imported on first use (PEP 562): the plugin module is loaded, with this package, by
# every app that resolves a serializer, and fastavro is a noticeable part of a start.
_WHERE = {
    "AvroSerializer": "runnel_avro.serializer",
    "Compatibility": "runnel_avro.compatibility",
    "derive": "runnel_avro.schema",
    "load_schema": "runnel_avro.serializer",
    "problems": "runnel_avro.compatibility",
    "schema_fingerprint": "runnel_avro.serializer",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'runnel_avro' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
