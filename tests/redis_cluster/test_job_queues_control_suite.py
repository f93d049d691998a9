"""Cancels and periodic jobs with named queues across real processes
(tests/jobs/test_job_queues_control_processes.py) run again on a Redis Cluster.

A named queue's stream and schedule, the cancel notices and the ticks hash all carry the
app's hash tag, so a cancel finds the job in its own queue, and a tick's job is enqueued
in its queue, in one script on one master. The test bodies and checks are that module's
own; only ``redis_url`` names the cluster.
"""

from __future__ import annotations

from tests.jobs.test_job_queues_control_processes import (  # noqa: F401
    project,
    test_a_periodic_job_with_a_queue_is_enqueued_in_that_queue,
    test_a_queued_job_of_a_named_queue_cancelled_never_runs,
    test_a_running_job_taken_through_queues_is_cancelled,
)
from tests.support.redis_cluster import app_name, redis_url  # noqa: F401
