"""Writer schemas of a stream in a :class:`~runnel.memory.server.MemoryServer`."""

from __future__ import annotations

from runnel.memory.server import MemoryServer
from runnel.store.schemas import Check, SchemaStore


class MemorySchemaStore(SchemaStore):
    def __init__(self, store: MemoryServer, app: str, stream: str) -> None:
        self.server = store
        self._key = ("schm", app, stream)

    async def all(self) -> dict[str, str]:
        with self.server.lock:
            return dict(self.server.values.get(self._key, {}))

    async def add(self, fingerprint: str, schema: str, check: Check) -> dict[str, str]:
        # Checked and added under the lock: two writers cannot both add incompatible ones.
        with self.server.lock:
            stored: dict[str, str] = self.server.values.setdefault(self._key, {})
            if fingerprint not in stored:
                check(dict(stored))
                stored[fingerprint] = schema
            return dict(stored)
