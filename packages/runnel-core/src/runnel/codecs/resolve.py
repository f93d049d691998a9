"""Turning a serializer setting (an object or a name such as ``"msgpack+gzip"``) into an object."""

from __future__ import annotations

from typing import Any

from runnel.interfaces import Serializer
from runnel.plugins.manager import registry


def resolve_serializer(spec: Any) -> Serializer:
    """Accept a :class:`Serializer` or ``"NAME"`` / ``"NAME+COMPRESSOR"`` by plugin names."""
    if isinstance(spec, Serializer) or (hasattr(spec, "dumps") and hasattr(spec, "loads")):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"a serializer must be a Serializer or a name, not {spec!r}")
    name, _, compressor_name = spec.partition("+")
    reg = registry()
    compressor = reg.get("compressor", compressor_name).factory() if compressor_name else None
    return reg.get("serializer", name).factory(compressor=compressor)
