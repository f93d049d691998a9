"""Built-in serializers (JSON, msgpack) and compressors (gzip)."""

from runnel.codecs.compressors import GzipCompressor
from runnel.codecs.serializers import JSONSerializer, MsgpackSerializer

__all__ = ["GzipCompressor", "JSONSerializer", "MsgpackSerializer"]
