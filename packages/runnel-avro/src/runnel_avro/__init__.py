"""Avro for Runnel: schemas derived from records, stored once per stream, evolved safely."""

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
