"""Writer schemas of a stream in one Redis hash: ``__schm:{app}.{stream}``, fingerprint -> JSON."""

from __future__ import annotations

from typing import cast

import redis.asyncio as aioredis
from redis.exceptions import WatchError

from runnel.store.schemas import Check, SchemaStore
from runnel_redis.layout import Classic, KeyLayout
from runnel_redis.seam import guarded


@guarded
class RedisSchemaStore(SchemaStore):
    def __init__(
        self, redis: aioredis.Redis, app: str, stream: str, layout: KeyLayout | None = None
    ) -> None:
        self.redis = redis
        self.key = (layout or Classic()).schemas(app, stream)

    async def all(self) -> dict[str, str]:
        # redis-py types replies as bytes | str; this client (no decode_responses) gives bytes.
        stored = cast(dict[bytes, bytes], await self.redis.hgetall(self.key))
        return {k.decode(): v.decode() for k, v in stored.items()}

    async def add(self, fingerprint: str, schema: str, check: Check) -> dict[str, str]:
        # Optimistic transaction: if another producer adds a schema between our read and
        # our write, EXEC fails and we check again against what it added.
        while True:
            async with self.redis.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(self.key)
                    raw = cast(dict[bytes, bytes], await pipe.hgetall(self.key))
                    stored = {k.decode(): v.decode() for k, v in raw.items()}
                    if fingerprint in stored:
                        return stored
                    check(stored)
                    pipe.multi()
                    pipe.hsetnx(self.key, fingerprint, schema)
                    await pipe.execute()
                    return {**stored, fingerprint: schema}
                except WatchError:
                    continue
