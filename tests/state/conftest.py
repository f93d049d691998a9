"""Tables, on every store: each test runs on ``memory://``, the session's redis-server and
a 3-master Redis Cluster (the last two emptied per test)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from runnel.memory import server as memory_servers
from runnel.testing import memory_url


@pytest.fixture(params=["memory", "redis", "cluster"])
def store_url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "memory":
        url = memory_url()
        yield url
        memory_servers.forget(urlsplit(url).netloc)
    elif request.param == "redis":
        yield request.getfixturevalue("redis_url")
    else:
        yield request.getfixturevalue("redis_cluster_url")


@pytest.fixture
def app_name() -> str:
    return f"t{uuid.uuid4().hex[:10]}"
