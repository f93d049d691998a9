"""Runnel's Redis Streams transport (``redis://``, ``rediss://``, ``unix://``) and an
embedded development server (``redis+embedded://``)."""

from runnel_redis.transport import RedisTransport

__all__ = ["RedisTransport"]
