"""Fixtures of the Spark tests: the session's local Spark (tests/support/spark.py) and the
module of records and streams under test."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from tests.support.spark import spark  # noqa: F401 (a fixture, registered by name)


@pytest.fixture
def streams(redis_url: str) -> ModuleType:
    """The module of records and streams, its app pointed at this run's redis-server."""
    module = importlib.import_module("tests.spark.streams")
    module.app.settings.redis_url = redis_url
    return module
