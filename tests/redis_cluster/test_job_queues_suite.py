"""Named job queues and priorities with real worker processes
(tests/jobs/test_job_queues_processes.py) run again on a Redis Cluster.

Every key of the app's job queue, those of each named queue included, carries the app's
hash tag, so a take from several queues is one script on one master; the tests' own
record list lives wherever it hashes. The test bodies and checks are that module's own;
only ``redis_url`` names the cluster.
"""

from __future__ import annotations

from tests.jobs.test_job_queues_processes import (  # noqa: F401
    project,
    test_a_worker_takes_only_its_queues_and_info_counts_per_queue,
    test_job_metrics_carry_the_queue,
    test_strict_priority_takes_a_later_queue_only_when_the_earlier_ones_are_empty,
    test_weighted_queues_share_the_jobs_started_by_their_weights,
    test_without_queues_a_worker_takes_every_declared_queue,
)
from tests.support.redis_cluster import app_name, redis_url  # noqa: F401
