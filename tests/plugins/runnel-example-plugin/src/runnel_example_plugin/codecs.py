"""A serializer and a compressor small enough to read in one go."""

from __future__ import annotations

import json
import zlib
from typing import Any

from runnel.interfaces import Compressor, Serializer

MARKER = b"TJ1 "
"""Leads every value ``tagged-json`` writes: the format and its version."""


class TaggedJSONSerializer(Serializer):
    """JSON behind a marker, so stored entries say what they are and others are refused."""

    name = "tagged-json"
    dump_mode = "json"  # records arrive as plain JSON data (datetimes as strings, ...)

    def __init__(self, compressor: Compressor | None = None) -> None:
        self.compressor = compressor

    def dumps(self, value: Any) -> bytes:
        return MARKER + json.dumps(value, separators=(",", ":")).encode()

    def loads(self, value: bytes) -> Any:
        if not value.startswith(MARKER):
            raise ValueError(f"not tagged-json data: {value[:8]!r}...")
        return json.loads(value[len(MARKER) :])


class ZlibCompressor(Compressor):
    """The standard library's zlib; named so it cannot clash with a built-in ``zlib``."""

    name = "example-zlib"

    def __init__(self, level: int = 6) -> None:
        self.level = level

    def compress(self, value: bytes) -> bytes:
        return zlib.compress(value, self.level)

    def decompress(self, value: bytes) -> bytes:
        return zlib.decompress(value)
