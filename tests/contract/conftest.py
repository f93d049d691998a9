"""The store contract suite's fixtures: every test runs once per store.

By default the stores are ``memory://`` (a fresh one per test), the session's private
redis-server and a 3-master Redis Cluster (both emptied per test); ``--stores memory,redis``
picks some of them. ``--store-url URL``
runs the suite against that one store instead, whatever plugin registered its scheme
(``--store-plugin MODULE`` loads a plugin that is not installed): docs/plugins.md,
"Testing a store". A test gets a fresh :class:`~runnel.store.Backend` and a fresh app
name, so tests never see each other's data even on one long-lived store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import pytest

from runnel.memory import server as memory_servers
from runnel.memory.backend import MemoryBackend
from runnel.plugins.manager import load_plugin
from runnel.settings import Settings
from runnel.store import Backend, LogAdmin, SyncLog, backend_for
from runnel.testing import memory_url
from tests.contract.support import ManualTime, RealTime, Time, fresh_app

STORES = ("memory", "redis", "cluster")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``store_url`` by store (the given one alone under ``--store-url``)."""
    if "store_url" not in metafunc.fixturenames:
        return
    given = metafunc.config.getoption("store_url")
    if given:
        metafunc.parametrize("store_url", [given], ids=[urlsplit(given).scheme], indirect=True)
    else:
        chosen = [name.strip() for name in metafunc.config.getoption("stores").split(",")]
        unknown = sorted(set(chosen) - set(STORES))
        if unknown:
            raise pytest.UsageError(f"--stores: no built-in store {', '.join(unknown)}")
        metafunc.parametrize("store_url", [s for s in STORES if s in chosen], indirect=True)


@pytest.fixture
def store_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """Where the store under test is; a conftest may override this to name its own."""
    for module in request.config.getoption("store_plugin"):
        load_plugin(module, "--plugin")
    if request.param == "memory":
        url = memory_url()
        yield url
        memory_servers.forget(urlsplit(url).netloc)
    elif request.param == "redis":
        yield request.getfixturevalue("redis_url")
    elif request.param == "cluster":
        yield request.getfixturevalue("redis_cluster_url")
    else:
        yield request.param


@pytest.fixture
async def backend(store_url: str) -> AsyncIterator[Backend]:
    """The store's backend, built from its URL as an App builds it."""
    store = backend_for(store_url, Settings())
    yield store
    await store.aclose()


@pytest.fixture
def app() -> str:
    """A fresh app name (dotted: a store must never parse names back)."""
    return fresh_app()


@pytest.fixture
def admin(backend: Backend) -> LogAdmin:
    found = backend.admin()
    if found is None:
        pytest.skip(f"optional part not offered: {type(backend).__name__}.admin() is None")
    return found


@pytest.fixture
def identities(backend: Backend) -> Backend:
    """The backend, if its log takes identities (optional: runnel.store.identity)."""
    if not backend.log.identities:
        name = type(backend.log).__name__
        pytest.skip(f"optional part not offered: {name}.append() takes no identity")
    return backend


@pytest.fixture
def sync_log(backend: Backend) -> Iterator[SyncLog]:
    found = backend.sync_log()
    if found is None:
        pytest.skip(f"optional part not offered: {type(backend).__name__}.sync_log() is None")
    yield found
    found.close()


@pytest.fixture
def store_time(backend: Backend) -> Time:
    """How a test lets locks, heartbeats and leaders expire: ``memory://`` gets a manual
    clock moved by the test; any other store is given real time to pass (short TTLs)."""
    if isinstance(backend, MemoryBackend):
        manual = ManualTime()
        backend.server.clock = manual.now
        return manual
    return RealTime()
