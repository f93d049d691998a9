"""Clients whose callers wait for a free connection instead of failing.

redis-py's asyncio clients keep at most ``max_connections`` connections per server (100
unless told otherwise) and raise ``MaxConnectionsError`` ("Too many connections") on the
next call once all are busy. Ordinary code fans out past that: a ``gather`` of 500
``status()`` calls in a web view, many partitions sending at once. Runnel's clients make
such a call wait for a connection, as a semaphore would, bounded by the
``redis_max_connections`` setting:

* on a single Redis, a pool whose calls wait their turn once every connection is in use
  (:class:`WaitingPool`);
* on a Redis Cluster, whose per-node pools have no waiting mode, a semaphore of the same
  size in front of every command and pipeline of the client. One call holds at most one
  connection per node, so no node is ever asked for more than the bound.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import MaxConnectionsError

DEFAULT_MAX_CONNECTIONS = 100
"""redis-py's own default, kept: the bound only stops being an error."""

_holding: ContextVar[bool] = ContextVar("runnel_redis_holding_a_connection", default=False)
"""Set while a task's call holds a place: redis-py's pipeline retries a redirected
command through the client, which must not wait for a second place (with every place
taken by such pipelines, nothing would ever be released)."""


def client(url: str, max_connections: int, **options: Any) -> aioredis.Redis:
    """An asyncio client for a single Redis (or a unix socket) whose calls wait for one of
    ``max_connections`` connections (runnel_redis.sentinel has the one through Sentinel)."""
    pool = WaitingPool.from_url(url, max_connections=max_connections, **options)
    return aioredis.Redis.from_pool(pool)


class Waiting:
    """Makes a redis-py pool's call that finds every connection in use wait for one to be
    released instead of raising. The usual path is the pool's own: waiting costs only
    when the bound is reached (redis-py's ``BlockingConnectionPool`` takes a lock and a
    condition on every call, about a tenth of a small command's time here)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        first = True
        while True:
            try:
                return await super().get_connection(*args, **kwargs)  # type: ignore[misc]
            except MaxConnectionsError:
                turn = asyncio.get_running_loop().create_future()
                # One that lost its turn to a newcomer goes back to the head of the line.
                (self._waiting.append if first else self._waiting.appendleft)(turn)
                first = False
                try:
                    await turn
                except BaseException:
                    if not turn.done():
                        self._waiting.remove(turn)
                    elif not turn.cancelled():
                        self._wake_one()  # given a turn it will not use: pass it on
                    raise

    async def release(self, connection: Any) -> None:
        await super().release(connection)  # type: ignore[misc]
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return


class WaitingPool(Waiting, aioredis.ConnectionPool):
    """redis-py's pool for one Redis, whose calls wait for a free connection."""


class _Places:
    """At most ``size`` calls of one client at a time; a call made inside another (by
    the same task) takes no second place."""

    def __init__(self, size: int) -> None:
        self._free = asyncio.Semaphore(size)

    @contextlib.asynccontextmanager
    async def taken(self) -> AsyncIterator[None]:
        if _holding.get():
            yield
            return
        async with self._free:
            token = _holding.set(True)
            try:
                yield
            finally:
                _holding.reset(token)


class WaitingCluster(RedisCluster):
    """redis-py's asyncio ``RedisCluster`` whose commands and pipelines wait for a place
    when ``max_connections`` calls are already under way."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max_connections", DEFAULT_MAX_CONNECTIONS)
        super().__init__(*args, **kwargs)
        self._places = _Places(kwargs["max_connections"])

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        async with self._places.taken():
            if self._initialize:
                # redis-py picks a command's node by its key only once it knows a node:
                # the calls that start before the slot map is read go to whichever node
                # answers, come back MOVED, and their redirections refresh the map again
                # and again, closing connections other calls are using. Read the map
                # first (once: the client's lock makes the others wait for it).
                await self.initialize()
            return await super().execute_command(*args, **kwargs)

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> Any:
        if shard_hint:  # as the parent refuses it
            return super().pipeline(transaction, shard_hint)
        return _WaitingPipeline(self, transaction)  # type: ignore[abstract]


class _WaitingPipeline(ClusterPipeline):
    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> Any:
        places = self.cluster_client._places  # type: ignore[attr-defined]
        async with places.taken():
            return await super().execute(raise_on_error, allow_redirections)
