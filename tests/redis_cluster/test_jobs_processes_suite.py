"""The job queue across real worker processes (tests/jobs/test_jobs_processes.py) run
again on a Redis Cluster.

Real ``runnel worker`` processes and supervisors on a 3-master cluster, running jobs while
one is killed (SIGKILL), frozen (SIGSTOP) past its heartbeat, stopped (SIGTERM, SIGINT)
or its supervisor killed. The test bodies and their checks are that module's own (every
job SUCCESS from its last try, by the worker that ran it; the queue and schedule empty;
late outcomes refused; no process left behind); only ``redis_url`` names the cluster.
The whole job queue of the app carries the app's hash tag, so it lives on one master;
the stream's partitions and the tests' own record lists spread over all three.
None is left out: none goes through a proxy to one server or watches one with MONITOR.
"""

from __future__ import annotations

from tests.jobs.test_jobs_processes import (  # noqa: F401
    jobs,
    test_children_stop_when_the_supervisor_is_killed,
    test_job_killing_its_worker_ends_dead_after_its_tries,
    test_kill_9_mid_job_the_job_runs_again_elsewhere,
    test_sigstop_between_reading_a_job_and_starting_it,
    test_sigstop_past_the_heartbeat_the_late_outcome_is_refused,
    test_sigterm_lets_a_job_finish_within_the_grace_period,
    test_sigterm_puts_a_job_longer_than_the_grace_period_back,
    test_supervisor_runs_streams_and_jobs_and_restarts_a_killed_child,
    test_supervisor_second_sigint_stops_at_once,
    test_supervisor_sigint_stops_all_children_gracefully,
)
from tests.support.redis_cluster import app_name, redis_url  # noqa: F401
