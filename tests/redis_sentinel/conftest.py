"""The sentinel setup (tests/support/sentinel.py): one for the whole run of each worker
process, healed and emptied before each test that asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.redis_cluster import missing_tools
from tests.support.sentinel import SentinelGroup, start_sentinels


@pytest.fixture(scope="session")
def _sentinel_group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelGroup]:
    if reason := missing_tools():
        pytest.skip(reason)
    with start_sentinels(tmp_path_factory.mktemp("sentinel")) as group:
        yield group


@pytest.fixture
def sentinels(_sentinel_group: SentinelGroup) -> Iterator[SentinelGroup]:
    """A master with a replica in sync and three sentinels, emptied first."""
    _sentinel_group.heal()
    _sentinel_group.flush()
    yield _sentinel_group
    _sentinel_group.heal()


@pytest.fixture
def sentinel_url(sentinels: SentinelGroup) -> str:
    return sentinels.url()
