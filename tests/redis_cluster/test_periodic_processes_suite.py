"""Periodic jobs across real worker processes (tests/jobs/test_periodic_processes.py) run
again on a 3-master Redis Cluster.

Three ``runnel worker`` processes settle every second's tick while the elected leader is
killed (SIGKILL); ticks missed while every worker was down run once or are skipped; a bad
schedule is one error line with nothing enqueued. The test bodies and their checks are
that module's own; only ``redis_url`` names the cluster. The ticks hash carries the app's
hash tag like the rest of the job queue, so settling a tick (the compare-and-set and the
tick's job) is one script on one master.
"""

from __future__ import annotations

from tests.jobs.test_periodic_processes import (  # noqa: F401
    cron,
    test_bad_schedules_are_one_error_line_and_nothing_enqueued,
    test_every_second_three_workers_the_leader_killed_one_run_per_tick,
    test_ticks_missed_while_every_worker_was_down,
)
from tests.support.redis_cluster import app_name, redis_url  # noqa: F401
