"""The dashboard's workflows in headless Chromium (tests/dashboard/test_dashboard_workflows.py)
run again on a Redis Cluster: a real worker process and a real `runnel dashboard`, the
workflows listed from the index and hashes on the app's master. Only ``redis_url`` names
the cluster."""

from __future__ import annotations

from tests.dashboard.test_dashboard_workflows import (  # noqa: F401
    test_workflows_and_their_jobs_are_listed,
)
from tests.support.dashboard import browser  # noqa: F401
from tests.support.redis_cluster import app_name, redis_url  # noqa: F401
