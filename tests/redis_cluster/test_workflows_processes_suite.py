"""A chord across real worker processes (tests/jobs/test_workflows_processes.py) run again
on a Redis Cluster: the workflow and every job of it carry the app's hash tag, so it is
enqueued in one script on one master, and each member's outcome releases the callback
there. The test body and its checks are that module's own; only ``redis_url`` names the
cluster."""

from __future__ import annotations

from tests.jobs.test_workflows_processes import (  # noqa: F401
    test_a_chord_callback_runs_once_through_kill_9_and_sigstop,
)
from tests.support.redis_cluster import app_name, redis_url  # noqa: F401
