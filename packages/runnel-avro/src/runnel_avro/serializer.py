"""The Avro serializer: fastavro binary in Avro's single-object encoding.

Each event is ``C3 01`` + the 8-byte CRC-64-AVRO fingerprint of its writer schema + the
Avro binary body. The writer schemas themselves are stored once per stream (see
:mod:`runnel.schemas`), so any reader resolves them: data written with an older or newer
schema is read through Avro schema resolution into the reader's record class.
"""

from __future__ import annotations

import copy
import io
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from runnel.codecs.fidelity import AVRO, refused
from runnel.exceptions import DecodeError, Misconfigured, SchemaIncompatible
from runnel.interfaces import Compressor, Serializer
from runnel.record import Record
from runnel.store.schemas import SchemaStore
from runnel_avro.compatibility import Compatibility, DamagedSchema, problems
from runnel_avro.schema import _enum_symbols, derive, unwritten

log = logging.getLogger("runnel.avro")

MAGIC = b"\xc3\x01"
"""The marker of Avro's single-object encoding."""


def schema_fingerprint(schema: dict[str, Any]) -> str:
    """The CRC-64-AVRO fingerprint of ``schema``'s canonical form, as 16 hex digits.

    The hex digits are the 8 little-endian bytes that follow the marker in each event.
    """
    return fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO")


def load_schema(source: str | Path | dict[str, Any]) -> dict[str, Any]:
    """An Avro schema from a dict, a JSON text, or the path of an ``.avsc`` file."""
    if isinstance(source, dict):
        return copy.deepcopy(source)
    text = str(source)
    if isinstance(source, Path) or not text.lstrip().startswith("{"):
        try:
            text = Path(text).read_text()
        except OSError as exc:
            raise Misconfigured(f"cannot read Avro schema {str(source)!r}: {exc}") from None
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise Misconfigured(f"Avro schema {str(source)[:60]!r} is not valid JSON: {exc}") from None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise Misconfigured("an Avro schema for a stream must be a record schema")
    return schema


class AvroSerializer(Serializer):
    """Avro with stored writer schemas and schema evolution.

    ``AvroSerializer()`` (or the name ``"avro"``) derives the schema from each stream's
    Record class; ``AvroSerializer(schema="order.avsc")`` uses a given one instead.
    ``compatibility`` says which schema changes a producer may make on a stream:
    ``"backward"`` (default), ``"forward"``, ``"full"`` or ``"none"``.
    """

    name = "avro"
    dump_mode = "python"

    def __init__(
        self,
        compressor: Compressor | None = None,
        *,
        schema: str | Path | dict[str, Any] | None = None,
        compatibility: Compatibility | str = Compatibility.BACKWARD,
    ) -> None:
        self.compressor = compressor
        self.given = load_schema(schema) if schema is not None else None
        try:
            self.compatibility = Compatibility(compatibility)
        except ValueError:
            choices = ", ".join(c.value for c in Compatibility)
            raise Misconfigured(
                f"Avro compatibility must be one of {choices}, not {compatibility!r}"
            ) from None
        self.record: type[Record] | None = None

    def __repr__(self) -> str:
        bound = f" for {self.record.__name__}" if self.record is not None else ""
        return (
            f"AvroSerializer(compressor={self.compressor!r}, "
            f"compatibility={self.compatibility.value!r}){bound}"
        )

    # Binding to a stream's record type.

    def bind(self, record: type[Record]) -> AvroSerializer:
        bound = copy.copy(self)
        bound._bind(record)
        return bound

    def _bind(self, record: type[Record]) -> None:
        self.record = record
        if self.given is not None:
            self.schema = self.given
            _check_covers(self.schema, record)
            self._encode: Any = _plain_enums
            self._decode: Any = None
        else:
            derived = derive(record)
            self.schema = derived.schema
            self._encode = derived.encode
            self._decode = derived.decode
        try:
            self.parsed = fastavro.parse_schema(copy.deepcopy(self.schema))
        except Exception as exc:
            raise Misconfigured(f"{record.__name__}: not a valid Avro schema: {exc}") from None
        self.fingerprint = schema_fingerprint(self.schema)
        self.header = MAGIC + bytes.fromhex(self.fingerprint)
        self.text = json.dumps(self.schema)
        # Writer schemas by fingerprint bytes; our own reads without resolution (None).
        self._writers: dict[bytes, Any] = {self.header[2:]: None}
        self._texts: dict[str, str] = {self.fingerprint: self.text}

    def _bound(self) -> type[Record]:
        if self.record is None:
            raise Misconfigured("AvroSerializer is used through a stream (it needs its record)")
        return self.record

    # Encoding.

    def dumps(self, value: Any) -> bytes:
        self._bound()
        buffer = io.BytesIO()
        buffer.write(self.header)
        try:
            plain = value if self._encode is None else self._encode(value)
            fastavro.schemaless_writer(buffer, self.parsed, plain)
        except (TypeError, ValueError, OverflowError) as exc:
            raise refused(value, AVRO, exc) from exc
        return buffer.getvalue()

    def loads(self, value: bytes) -> Any:
        self._bound()
        if value[:2] != MAGIC or len(value) < 10:
            raise DecodeError("not Avro single-object encoded data (no C3 01 marker)")
        key = bytes(value[2:10])
        try:
            writer = self._writers[key]
        except KeyError:
            raise DecodeError(
                f"written with Avro schema {key.hex()}, which is not stored for this stream"
            ) from None
        body = io.BytesIO(value)
        body.seek(10)
        if writer is None:
            data = fastavro.schemaless_reader(body, self.parsed, None)
        else:
            parsed, unwritten = writer
            data = fastavro.schemaless_reader(body, parsed, self.parsed)
            if unwritten is not None:
                data = unwritten(data)
        return data if self._decode is None else self._decode(data)

    # Stored schemas.

    async def prepare(self, schemas: SchemaStore, *, writing: bool) -> None:
        record = self._bound()
        if writing:
            stored = await schemas.add(self.fingerprint, self.text, self._check_new)
        else:
            stored = await schemas.all()
            if self.compatibility in (Compatibility.BACKWARD, Compatibility.FULL):
                # A consumer that cannot read what is stored is refused now, not per event.
                for fp, text in stored.items():
                    if fp != self.fingerprint and (found := self._problems(fp, self.schema, text)):
                        raise SchemaIncompatible(
                            f"{record.__name__} cannot read events written with stored "
                            f"schema {fp}: {found[0]}"
                        )
        self.load_schemas(stored)

    def unknown(self, data: bytes) -> bool:
        return data[:2] == MAGIC and bytes(data[2:10]) not in self._writers

    async def refresh(self, schemas: SchemaStore) -> None:
        self.load_schemas(await schemas.all())

    def load_schemas(self, stored: Mapping[str, str]) -> None:
        """Make writer schemas (fingerprint -> JSON, as stored) known for decoding."""
        for fp, text in stored.items():
            if fp in self._texts:
                continue
            try:
                schema = json.loads(text)
                # With a derived schema, fields the writer lacked get the record's defaults.
                fill = unwritten(self.schema, schema) if self.given is None else None
                self._writers[bytes.fromhex(fp)] = (fastavro.parse_schema(schema), fill)
                self._texts[fp] = text
            except Exception:  # a damaged entry: events using it fail to decode, and say so
                continue

    def _check_new(self, stored: Mapping[str, str]) -> None:
        """Refuse our schema as a new writer schema if it breaks the compatibility rule."""
        mode = self.compatibility
        if mode is Compatibility.NONE:
            return
        for fp, text in stored.items():
            found = []
            if mode in (Compatibility.BACKWARD, Compatibility.FULL):
                found += self._problems(fp, self.schema, text)
            if mode in (Compatibility.FORWARD, Compatibility.FULL):
                found += [
                    f"{p} (for readers of stored schema)"
                    for p in self._problems(fp, text, self.schema)
                ]
            if found:
                raise SchemaIncompatible(
                    f"the schema of {self._bound().__name__} is incompatible ({mode.value}) "
                    f"with stored schema {fp}: " + "; ".join(found)
                )

    def _problems(self, fp: str, reader: Any, writer: Any) -> list[str]:
        try:
            return problems(reader, writer)
        except DamagedSchema as exc:
            # Nothing can be written with it or read through it; it must not block the rest.
            log.warning("stored Avro schema %s of %s is damaged, skipped: %s", fp, self.record, exc)
            return []

    @property
    def stored(self) -> dict[str, str]:
        """The writer schemas known so far (fingerprint -> JSON), ours included."""
        return dict(self._texts)


def _plain_enums(value: Any) -> Any:
    """For a given schema: enum members become their symbols, wherever they are."""
    if isinstance(value, dict):
        return {k: _plain_enums(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain_enums(v) for v in value]
    return _enum_symbols(value)


def _check_covers(schema: dict[str, Any], record: type[Record]) -> None:
    """A given schema must have a field for each required field of the record."""
    names = {f.get("name") for f in schema.get("fields", [])}
    for name, info in record.model_fields.items():
        if name not in names and info.is_required():
            raise Misconfigured(
                f"{record.__name__}.{name}: the Avro schema {schema.get('name')!r} has no such "
                "field"
            )
