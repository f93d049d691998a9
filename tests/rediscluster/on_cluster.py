"""Fixtures for a suite written for a single Redis and run again on the cluster: import
them next to the tests (``from tests.rediscluster.on_cluster import app_name, redis_url``)
and the test bodies get the cluster's URL and a fresh app name each."""

from __future__ import annotations

import uuid

import pytest

from tests.rediscluster.cluster import RedisClusterProcesses


@pytest.fixture
def redis_url(redis_cluster: RedisClusterProcesses) -> str:
    return redis_cluster.url


@pytest.fixture
def app_name() -> str:
    return f"t{uuid.uuid4().hex[:10]}"
