"""The ``project`` fixture: the app module of tests/support/cli_app.py in ``tmp_path``."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from tests.support.cli_app import Project, write_app


@pytest.fixture
def project(tmp_path: Path, app_name: str, redis_url: str, redis_client: redis.Redis) -> Project:
    write_app(tmp_path, app_name)
    return Project(dir=tmp_path, app_name=app_name, redis_url=redis_url, client=redis_client)
