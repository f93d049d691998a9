"""Turning a serializer setting (an object or a name such as ``"msgpack+gzip"``) into an object."""

from __future__ import annotations

from typing import Any

from runnel.exceptions import Misconfigured
from runnel.imports import import_path
from runnel.interfaces import Serializer
from runnel.plugins.manager import registry


def _is_serializer(obj: Any) -> bool:
    return isinstance(obj, Serializer) or (hasattr(obj, "dumps") and hasattr(obj, "loads"))


def resolve_serializer(spec: Any) -> Serializer:
    """Accept a :class:`Serializer`, ``"NAME"`` / ``"NAME+COMPRESSOR"`` by plugin names, or
    an import path of a serializer (``module:attr``, or runnel 0.1's ``module.attr`` as in
    its ``default_serializer = "runnel.serialization.default"``); a class is instantiated."""
    if _is_serializer(spec):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"a serializer must be a Serializer or a name, not {spec!r}")
    name, _, compressor_name = spec.partition("+")
    reg = registry()
    if not compressor_name and (":" in name or "." in name) and name not in reg.names("serializer"):
        return _imported_serializer(name)
    compressor = reg.get("compressor", compressor_name).factory() if compressor_name else None
    return reg.get("serializer", name).factory(compressor=compressor)


def _imported_serializer(path: str) -> Serializer:
    """The serializer an import path names: an instance, or a class made with no arguments."""
    obj = import_path(path)
    if isinstance(obj, type):
        obj = obj()
    if not _is_serializer(obj):
        raise Misconfigured(f"{path!r} is not a serializer (it has no dumps and loads)")
    return obj
