"""Shared fixtures for the fast unit tests: no Redis server, no network."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator

import pytest

from tests.support.units import app, no_runnel_env  # noqa: F401 (fixtures, registered by name)


@pytest.fixture
def uid() -> str:
    """A fresh identifier, for module and plugin names that must not collide across tests."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def forget_modules() -> Iterator[list[str]]:
    """Names appended to the yielded list (and their submodules) leave sys.modules afterwards."""
    names: list[str] = []
    saved_path = list(sys.path)
    yield names
    sys.path[:] = saved_path
    for mod in list(sys.modules):
        if any(mod == n or mod.startswith(n + ".") for n in names):
            del sys.modules[mod]
