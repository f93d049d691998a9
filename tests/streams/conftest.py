"""Fixtures of the stream tests in one process (helpers: tests/support/apps.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from runnel_redis.transport import RedisTransport
from tests.support.apps import store_url  # noqa: F401 (a fixture: memory:// and Redis)


@pytest.fixture
async def transport(redis_url: str) -> AsyncIterator[RedisTransport]:
    """The Redis store of the session's server, driven directly."""
    t = RedisTransport(redis_url)
    yield t
    await t.aclose()
