"""The behavioural suite runs every test on both stores: the in-memory one (``memory://``)
and a real redis-server (the session's private server, emptied per test), so the two
cannot drift apart."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["memory", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    """What ``runnel.testing.run(app, store=...)`` takes: ``"memory"`` or the Redis URL."""
    if request.param == "memory":
        return "memory"
    return str(request.getfixturevalue("redis_url"))
