"""Workflows run by a worker in the test's loop (tests/jobs/test_workflows.py) run again on
a Redis Cluster: a workflow and all its jobs carry the app's hash tag, so each is
enqueued, released and failed by scripts on one master."""

from __future__ import annotations

import pytest

from tests.jobs.test_workflows import (  # noqa: F401
    test_a_chain_passes_each_result_on,
    test_a_dead_member_fails_the_workflow_and_runs_on_error_once,
    test_a_group_keeps_member_order_and_a_chord_gets_every_result,
    test_bad_input_is_refused_whole,
    test_cancel_a_workflow,
    test_delay_sync,
    test_nested_forms,
)
from tests.support.redis_cluster import RedisClusterProcesses, app_name  # noqa: F401


@pytest.fixture
def store_url(redis_cluster: RedisClusterProcesses) -> str:
    """The emptied 3-master cluster in place of memory:// and the single Redis."""
    return redis_cluster.url
