"""What the tests without a server share: a URL nothing listens on, an App that never
connects, and an environment free of the shell's RUNNEL_* variables.

``no_runnel_env`` (autouse) and ``app`` are fixtures: a conftest, or a test module of
unit tests kept with other tests, imports them by name.
"""

from __future__ import annotations

import os

import pytest

from runnel import App

UNREACHABLE = "redis://127.0.0.1:1"
"""A URL nothing listens on: an App only connects when it is used, and these tests never use it."""


@pytest.fixture(autouse=True)
def no_runnel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever RUNNEL_* variables the surrounding shell has must not leak into a test."""
    for key in list(os.environ):
        if key.upper().startswith("RUNNEL_"):
            monkeypatch.delenv(key)


@pytest.fixture
def app() -> App:
    return App(name="u", redis_url=UNREACHABLE)
