"""The multi-process worker suite (tests/processes/) run again on a Redis Cluster.

Real `runnel worker` processes on a 3-master cluster: one killed with SIGKILL, one frozen
with SIGSTOP past two lock lifetimes, workers joining and leaving while events flow. The
test bodies and their checks are those of tests/processes (nothing lost, each key's order
kept, no partition worked on by two processes at once, every iteration under its own
lock); only ``redis_url`` names the cluster. Left out: the tests that go through a TCP
proxy to one node, kill connections on one server, or watch one server with MONITOR.
"""

from __future__ import annotations

from tests.processes.test_failures import (  # noqa: F401
    test_kill_9_one_of_three_workers,
    test_sigstop_longer_than_two_lock_expiries_then_sigcont,
)
from tests.processes.test_scaling import test_scale_out_then_in_while_events_flow  # noqa: F401
from tests.support.redis_cluster import app_name, redis_url  # noqa: F401
from tests.support.worker_cluster import cluster  # noqa: F401
