"""The ``cluster`` fixture (several real worker processes: tests/support/worker_cluster.py)
and the ``measurement`` marker."""

from __future__ import annotations

import pytest

from tests.support.worker_cluster import cluster  # noqa: F401 (a fixture, registered by name)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "measurement: prints timings for information only, asserts nothing on time"
    )
