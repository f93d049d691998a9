"""The state role on Redis: a table's partition is one hash, in its source partition's slot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from runnel.store.log import PartitionId
from runnel.store.state import TableStore
from runnel_redis.layout import KeyLayout
from runnel_redis.seam import guarded


@guarded
class RedisTableStore(TableStore):
    def __init__(self, client: Any, layout: KeyLayout, app: str) -> None:
        self.redis = client
        self.layout = layout
        self.counts_key = layout.table_counts(app)

    def key(self, table: str, partition: PartitionId) -> str:
        app, stream, number = partition
        return self.layout.table(app, stream, table, number)

    def deadlines_key(self, table: str, partition: PartitionId) -> str:
        app, stream, number = partition
        return self.layout.deadlines(app, stream, table, number)

    async def due(
        self, table: str, partition: PartitionId, count: int, offset: int = 0
    ) -> list[tuple[bytes, float]]:
        found = await self.redis.zrange(
            self.deadlines_key(table, partition), offset, offset + count - 1, withscores=True
        )
        return [(bytes(member), float(score)) for member, score in found]

    async def get(
        self, table: str, partition: PartitionId, keys: Sequence[bytes]
    ) -> list[bytes | None]:
        if not keys:
            return []
        return cast(list[bytes | None], await self.redis.hmget(self.key(table, partition), keys))

    async def get_small(
        self, table: str, partition: PartitionId, keys: Sequence[bytes], limit: int
    ) -> tuple[list[bytes | None], dict[bytes, bytes] | None]:
        key = self.key(table, partition)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hlen(key)
            if keys:
                pipe.hmget(key, keys)
            size, *found = await pipe.execute()
        values = cast(list[bytes | None], found[0] if keys else [])
        if int(size) > limit:
            return values, None
        # Only the owner writes the hash, so nothing changes between the two reads.
        return values, (dict(await self.redis.hgetall(key)) if int(size) else {})

    async def scan(
        self, table: str, partition: PartitionId, cursor: bytes, count: int
    ) -> tuple[bytes, list[tuple[bytes, bytes]]]:
        following, found = await self.redis.hscan(
            self.key(table, partition), int(cursor or 0), count=count
        )
        return (b"" if int(following) == 0 else str(following).encode()), list(found.items())

    async def sizes(self, table: str, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        async with self.redis.pipeline(transaction=False) as pipe:
            for partition in partitions:
                pipe.hlen(self.key(table, partition))
            counts = await pipe.execute()
        return {p: int(n) for p, n in zip(partitions, counts, strict=True)}

    async def clear(self, table: str, partitions: Sequence[PartitionId]) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            for partition in partitions:
                pipe.delete(self.key(table, partition), self.deadlines_key(table, partition))
            await pipe.execute()

    async def partition_counts(self, tables: Sequence[str]) -> dict[str, int]:
        if not tables:
            return {}
        found = await self.redis.hmget(self.counts_key, list(tables))
        return {t: int(n) for t, n in zip(tables, found, strict=True) if n is not None}

    async def set_partition_count(self, table: str, count: int) -> int:
        await self.redis.hsetnx(self.counts_key, table, count)
        return int(await self.redis.hget(self.counts_key, table))

    async def forget(self, table: str) -> None:
        await self.redis.hdel(self.counts_key, table)
