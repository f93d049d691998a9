"""The state role of the ``memory://`` store: committed table values in this process."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from runnel.memory.server import MemoryServer
from runnel.store.log import PartitionId
from runnel.store.state import TableStore


class MemoryTableStore(TableStore):
    def __init__(self, server: MemoryServer, app: str) -> None:
        self.server = server
        self.app = app

    async def get(
        self, table: str, partition: PartitionId, keys: Sequence[bytes]
    ) -> list[bytes | None]:
        with self.server.lock:
            found = self.server.tables.get((table, partition), {})
            return [found.get(key) for key in keys]

    async def get_small(
        self, table: str, partition: PartitionId, keys: Sequence[bytes], limit: int
    ) -> tuple[list[bytes | None], dict[bytes, bytes] | None]:
        with self.server.lock:
            found = self.server.tables.get((table, partition), {})
            values = [found.get(key) for key in keys]
            return values, (dict(found) if len(found) <= limit else None)

    async def scan(
        self, table: str, partition: PartitionId, cursor: bytes, count: int
    ) -> tuple[bytes, list[tuple[bytes, bytes]]]:
        # Keys in their sorted order; the cursor is the last key returned (after a
        # marker byte), so a scan goes on past it whatever came and went meanwhile.
        with self.server.lock:
            found = self.server.tables.get((table, partition), {})
            keys = sorted(found)
            start = bisect.bisect_right(keys, cursor[1:]) if cursor else 0
            page = keys[start : start + count]
            entries = [(key, found[key]) for key in page]
        done = start + len(page) >= len(keys)
        return (b"" if done else b">" + page[-1]), entries

    async def due(
        self, table: str, partition: PartitionId, count: int, offset: int = 0
    ) -> list[tuple[bytes, float]]:
        with self.server.lock:
            held = self.server.deadlines.get((table, partition), {})
            ordered = sorted(held.items(), key=lambda kv: (kv[1], kv[0]))
            return ordered[offset : offset + count]

    async def sizes(self, table: str, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        with self.server.lock:
            return {p: len(self.server.tables.get((table, p), {})) for p in partitions}

    async def clear(self, table: str, partitions: Sequence[PartitionId]) -> None:
        with self.server.lock:
            for p in partitions:
                self.server.tables.pop((table, p), None)
                self.server.deadlines.pop((table, p), None)

    async def partition_counts(self, tables: Sequence[str]) -> dict[str, int]:
        with self.server.lock:
            held = self.server.values.get(("table counts", self.app), {})
            return {t: held[t] for t in tables if t in held}

    async def set_partition_count(self, table: str, count: int) -> int:
        with self.server.lock:
            held = self.server.values.setdefault(("table counts", self.app), {})
            return int(held.setdefault(table, count))

    async def forget(self, table: str) -> None:
        with self.server.lock:
            self.server.values.get(("table counts", self.app), {}).pop(table, None)
