"""Fixtures: a real Redis Cluster (not tests/cluster/, the multi-process worker suite).

Registered for every test directory by tests/conftest.py, so that one session cluster
serves tests/rediscluster and the store contract suite (tests/contract) alike.

``redis_cluster``: 3 masters for the whole session, emptied before each test that asks
for it. ``redis_cluster_replicas``: 3 masters with a replica each, for failover tests;
every node a test killed is brought back (as a replica) after it. A slot migration a test
leaves half done is completed after it. Both skip with the
reason when redis-server or redis-cli is not installed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.rediscluster.cluster import RedisClusterProcesses, missing_tools, start_cluster


@pytest.fixture(scope="session")
def _cluster_masters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterProcesses]:
    if reason := missing_tools():
        pytest.skip(reason)
    with start_cluster(tmp_path_factory.mktemp("rediscluster"), masters=3) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def _cluster_with_replicas(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RedisClusterProcesses]:
    if reason := missing_tools():
        pytest.skip(reason)
    with start_cluster(
        tmp_path_factory.mktemp("rediscluster-replicas"), masters=3, replicas=1
    ) as cluster:
        yield cluster


@pytest.fixture
def redis_cluster(_cluster_masters: RedisClusterProcesses) -> Iterator[RedisClusterProcesses]:
    """3 masters, no replicas, emptied first; a migration left half done is finished after."""
    _cluster_masters.flush()
    yield _cluster_masters
    _cluster_masters.finish_open_migrations()


@pytest.fixture
def redis_cluster_replicas(
    _cluster_with_replicas: RedisClusterProcesses,
) -> Iterator[RedisClusterProcesses]:
    """3 masters with a replica each, emptied first; killed nodes come back after the test."""
    _cluster_with_replicas.heal()
    _cluster_with_replicas.flush()
    yield _cluster_with_replicas
    _cluster_with_replicas.heal()
    _cluster_with_replicas.finish_open_migrations()


@pytest.fixture
def redis_cluster_url(redis_cluster: RedisClusterProcesses) -> str:
    """``redis+cluster://127.0.0.1:PORT`` of the emptied 3-master cluster."""
    return redis_cluster.url
