"""Cancelling jobs and their progress across real processes (tests/jobs/test_job_control.py)
run again on a Redis Cluster: the cancel script, the notices a worker waits on and the
progress of a job all live in the app's hash tag, so in the one slot of its job queue."""

from __future__ import annotations

from tests.jobs.test_job_control import (  # noqa: F401
    project,
    test_a_job_that_ended_is_not_cancelled,
    test_a_job_waiting_for_its_retry_cancelled_is_not_retried,
    test_a_queued_job_cancelled_never_runs,
    test_a_running_async_job_gets_cancelled_error_in_its_worker,
    test_a_running_sync_job_sees_its_flag_and_gives_its_slot_back,
    test_a_scheduled_job_cancelled_never_runs,
    test_progress_of_running_jobs_in_show_and_result,
    test_send_wait_on_a_job_cancelled_meanwhile_is_one_error_line,
)
from tests.support.redis_cluster import app_name, redis_url  # noqa: F401
