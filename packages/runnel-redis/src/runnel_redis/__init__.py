"""Runnel's Redis Streams transport (``redis://``, ``rediss://``, ``unix://``; through
Sentinel, ``redis+sentinel://`` and ``rediss+sentinel://``; on a Redis Cluster,
``redis+cluster://`` and ``rediss+cluster://``) and an embedded development server
(``redis+embedded://``).

``RedisTransport`` is imported on first use (PEP 562): every ``runnel`` command loads this
plugin, and redis-py is slow to import."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runnel_redis.transport import RedisTransport


def __getattr__(name: str) -> Any:
    if name != "RedisTransport":
        raise AttributeError(f"module 'runnel_redis' has no attribute {name!r}")
    from runnel_redis.transport import RedisTransport

    globals()[name] = RedisTransport
    return RedisTransport


__all__ = ["RedisTransport"]
