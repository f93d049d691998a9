"""Compressors: gzip (standard library, always there), zstd and lz4 (when installed)."""

from __future__ import annotations

import gzip
from typing import Any

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


class ZstdCompressor(Compressor):
    """Zstandard (``pip install runnel-core[zstd]``): much faster than gzip, as small."""

    name = "zstd"

    def __init__(self, level: int = 3) -> None:
        import zstandard

        self.level = level
        # Contexts are not thread-safe but are cheap to reuse within one event loop.
        self._compressor: Any = zstandard.ZstdCompressor(level=level)
        self._decompressor: Any = zstandard.ZstdDecompressor()

    def compress(self, value: bytes) -> bytes:
        return self._compressor.compress(value)

    def decompress(self, value: bytes) -> bytes:
        return self._decompressor.decompress(value)

    def __repr__(self) -> str:
        return f"ZstdCompressor(level={self.level})"


class LZ4Compressor(Compressor):
    """LZ4 frames (``pip install runnel-core[lz4]``): the fastest, compresses less."""

    name = "lz4"

    def __init__(self) -> None:
        import lz4.frame

        self._frame: Any = lz4.frame

    def compress(self, value: bytes) -> bytes:
        return self._frame.compress(value)

    def decompress(self, value: bytes) -> bytes:
        return self._frame.decompress(value)

    def __repr__(self) -> str:
        return "LZ4Compressor()"
