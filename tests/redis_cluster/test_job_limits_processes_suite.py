"""Rate and concurrency limits across real worker processes (tests/jobs/
test_job_limits_processes.py) run again on a Redis Cluster: the limits' keys carry the
app's hash tag, as every job key does, so the admission script runs on the one master
that holds the app's queue."""

from __future__ import annotations

from tests.jobs.test_job_limits_processes import (  # noqa: F401
    project,
    test_a_concurrency_limit_holds_across_three_worker_processes,
    test_a_killed_workers_slots_come_back_once_its_heartbeat_expires,
    test_a_rate_limit_holds_across_three_worker_processes,
    test_jobs_show_says_why_a_job_waits,
)
from tests.support.redis_cluster import app_name, redis_url  # noqa: F401
