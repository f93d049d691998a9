"""Registers the built-in codecs through the same hooks any third-party plugin uses."""

from __future__ import annotations

from runnel.codecs.compressors import GzipCompressor
from runnel.codecs.serializers import JSONSerializer, MsgpackSerializer
from runnel.plugins import hookimpl


@hookimpl
def runnel_serializers(register):
    register("json", JSONSerializer)
    register("msgpack", MsgpackSerializer)


@hookimpl
def runnel_compressors(register):
    register("gzip", GzipCompressor)
