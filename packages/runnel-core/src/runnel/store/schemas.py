"""Where serializers with schemas (Avro) keep the writer schemas of a stream.

Each entry carries only a short reference (a fingerprint) to the schema it was written
with; the schema itself is stored once per stream, so any reader can resolve it later.
A transport provides the store (:meth:`runnel.transport.Transport.schema_store`).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping

Check = Callable[[Mapping[str, str]], None]
"""Called with the stored schemas before one is added; raises to refuse the addition."""


class SchemaStore(abc.ABC):
    """The writer schemas of one stream, by fingerprint."""

    @abc.abstractmethod
    async def all(self) -> dict[str, str]:
        """Every stored schema: fingerprint -> schema text."""

    @abc.abstractmethod
    async def add(self, fingerprint: str, schema: str, check: Check) -> dict[str, str]:
        """Store ``schema`` unless ``check(stored)`` raises; return what is stored then.

        ``check`` and the addition are atomic with respect to other writers: two producers
        adding incompatible schemas at once cannot both succeed.
        """
