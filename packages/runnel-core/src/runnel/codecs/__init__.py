"""Built-in serializers (JSON, msgpack) and compressors (gzip; zstd and lz4 when installed)."""

from runnel.codecs.compressors import GzipCompressor, LZ4Compressor, ZstdCompressor
from runnel.codecs.serializers import JSONSerializer, MsgpackSerializer

__all__ = [
    "GzipCompressor",
    "JSONSerializer",
    "LZ4Compressor",
    "MsgpackSerializer",
    "ZstdCompressor",
]
