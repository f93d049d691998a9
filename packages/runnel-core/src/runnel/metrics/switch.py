"""Whether a worker collects metrics, answered without importing prometheus_client: a
worker without metrics (the default) starts without it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runnel.settings import Settings

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
SUPERVISED = "RUNNEL_METRICS_SUPERVISED"
"""Set by the supervisor for its children: collect metrics, the supervisor serves them."""


def supervised() -> bool:
    """Whether this process is a child whose metrics its supervisor serves."""
    return os.environ.get(SUPERVISED) == "1" and bool(os.environ.get(MULTIPROC_DIR))


def wanted(settings: Settings) -> bool:
    """Whether a worker with these settings collects metrics."""
    return settings.metrics_port is not None or supervised()
