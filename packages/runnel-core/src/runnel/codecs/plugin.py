"""Registers the built-in codecs through the same hooks any third-party plugin uses."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from runnel.codecs.compressors import GzipCompressor, LZ4Compressor, ZstdCompressor
from runnel.codecs.serializers import JSONSerializer, MsgpackSerializer
from runnel.plugins import hookimpl

if TYPE_CHECKING:
    from runnel.plugins.hookspecs import RegisterCompressor, RegisterSerializer


@hookimpl
def runnel_serializers(register: RegisterSerializer) -> None:
    register("json", JSONSerializer)
    register("msgpack", MsgpackSerializer)


@hookimpl
def runnel_compressors(register: RegisterCompressor) -> None:
    register("gzip", GzipCompressor)
    # Offered only when their package is installed, so `runnel plugins` tells the truth.
    if importlib.util.find_spec("zstandard") is not None:
        register("zstd", ZstdCompressor)
    if importlib.util.find_spec("lz4") is not None:
        register("lz4", LZ4Compressor)
