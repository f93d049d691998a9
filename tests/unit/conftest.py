"""Shared fixtures for the fast unit tests: no Redis server, no network."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest

from runnel import App

UNREACHABLE = "redis://127.0.0.1:1"
"""A URL nothing listens on: an App only connects when it is used, and these tests never use it."""


@pytest.fixture(autouse=True)
def _no_runnel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever RUNNEL_* variables the surrounding shell has must not leak into a test."""
    for key in list(os.environ):
        if key.upper().startswith("RUNNEL_"):
            monkeypatch.delenv(key)


@pytest.fixture
def app() -> App:
    return App(name="u", redis_url=UNREACHABLE)


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
