"""The job queue tests in one process (tests/jobs/test_job_queue.py) run again on a Redis
Cluster: the whole queue of an app carries the app's hash tag, so it lives in one slot and
its scripts run unchanged."""

from __future__ import annotations

from tests.jobs.test_job_queue import (  # noqa: F401
    new_app,
    test_arguments_arrive_converted_and_current_job_tells_the_job,
    test_concurrency_bounds_jobs_running_at_once,
    test_delay_says_whether_it_stored_the_job,
    test_get_returns_values_typed_by_the_return_annotation,
    test_get_with_a_timeout_both_ways,
    test_job_id_enqueues_once_after_success_until_results_ttl,
    test_job_timeout_fails_the_try_and_is_retried_then_dead,
    test_status_unknown_for_an_id_never_enqueued,
)
from tests.jobs.test_jobs import (  # noqa: F401
    test_what_the_serializer_cannot_carry_is_refused_at_delay,
)
from tests.support.apps import store_url  # noqa: F401
from tests.support.redis_cluster import app_name, redis_url  # noqa: F401
