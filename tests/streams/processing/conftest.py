"""Fixtures of the processing unit tests: no Redis server, no network; an App that never
connects and its ``pings`` stream (collaborators: tests/support/processing.py)."""

from __future__ import annotations

import pytest

from runnel import App
from runnel.stream import Stream
from tests.support.processing import Ping
from tests.support.units import (
    UNREACHABLE,
    no_runnel_env,  # noqa: F401 (autouse fixture, registered by name)
)


@pytest.fixture
def app() -> App:
    return App(name="u", redis_url=UNREACHABLE)


@pytest.fixture
def stream(app: App) -> Stream:
    return app.stream("pings", record=Ping, partition_by="key", partition_count=2)
