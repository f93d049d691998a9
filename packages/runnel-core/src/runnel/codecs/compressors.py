"""The gzip compressor (standard library, so always available)."""

from __future__ import annotations

import gzip

from runnel.interfaces import Compressor


class GzipCompressor(Compressor):
    name = "gzip"

    def __init__(self, level: int = 6) -> None:
        self.level = level

    def compress(self, value: bytes) -> bytes:
        return gzip.compress(value, compresslevel=self.level, mtime=0)

    def decompress(self, value: bytes) -> bytes:
        return gzip.decompress(value)

    def __repr__(self) -> str:
        return f"GzipCompressor(level={self.level})"
