"""Redis coordination as the tests that look at its keys see it: key names, and the real
coordination called with partition numbers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import redis

from runnel.store.log import PartitionId
from runnel_redis import keys
from runnel_redis.coordination import RedisCoordination
from runnel_redis.transport import RedisTransport
from tests.support.apps import HANG_GUARD
from tests.support.apps import pending_ids as redis_pending_ids

STREAM = "pings"
PROC = "proc"
COUNT = 8
GROUP = PROC  # consumer groups are named after processors
CONSUMER = "runnel"


def lock_key(app: str, n: int | str) -> str:
    return f"__lock:{app}.{STREAM}.{PROC}.{n}"


def beat_key(app: str, owner: str) -> str:
    return f"__beat:{app}.{STREAM}.{PROC}.{owner}"


def membership(client: redis.Redis, app: str) -> dict[str, Any]:
    raw = client.get(f"__memb:{app}.{STREAM}.{PROC}")
    return json.loads(raw) if raw else {}


def lock_owners(client: redis.Redis, app: str) -> dict[int, str | None]:
    values = client.mget([lock_key(app, n) for n in range(COUNT)])
    return {n: v.decode() if v else None for n, v in enumerate(values)}


def stream_key(app: str, n: int) -> PartitionId:
    return PartitionId(app, STREAM, n)


def pending_ids(client: redis.Redis, partition: PartitionId, group: str) -> list[bytes]:
    return redis_pending_ids(client, keys.partition(*partition), group)


class ByNumber:
    """The real coordination, its lock methods called with partition numbers (as these
    tests name partitions) rather than :class:`PartitionId`\\ s."""

    def __init__(self, inner: RedisCoordination, app: str) -> None:
        self.inner, self.app = inner, app

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _ids(self, numbers: Any) -> list[PartitionId]:
        return [PartitionId(self.app, STREAM, n) for n in numbers]

    async def acquire(self, owner: str, numbers: list[int], ttl_ms: int) -> set[int]:
        return {p.number for p in await self.inner.acquire(owner, self._ids(numbers), ttl_ms)}

    async def release(self, owner: str, numbers: list[int]) -> None:
        await self.inner.release(owner, self._ids(numbers))

    async def beat(self, owner: str, numbers: list[int], ttl_ms: int) -> set[int]:
        return {p.number for p in await self.inner.beat(owner, self._ids(numbers), ttl_ms)}

    async def lock_owners(self, count: int) -> dict[int, str | None]:
        owners = await self.inner.lock_owners(self._ids(range(count)))
        return {p.number: owner for p, owner in owners.items()}

    def lock_key(self, number: int) -> str:
        return self.inner.lock_key(PartitionId(self.app, STREAM, number))


def coordination(transport: RedisTransport, app: str) -> ByNumber:
    return ByNumber(transport.coordination(app, STREAM, PROC), app)


async def poll(check: Callable[[], Any], what: str) -> None:
    """Await ``check()`` until it is truthy (the hang guard bounds the wait)."""
    async with asyncio.timeout(HANG_GUARD):
        while True:
            if await check():
                return
            await asyncio.sleep(0.01)
