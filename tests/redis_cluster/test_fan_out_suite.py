"""Many concurrent calls from one process on a Redis Cluster: the fan-out tests of the
single-Redis suite (tests/streams/test_fan_out.py), run on a 3-master cluster."""

from __future__ import annotations

from tests.streams.test_fan_out import (  # noqa: F401
    test_results_fetched_at_once_all_succeed,
    test_sends_and_delays_at_once_all_succeed,
    test_status_reads_at_once_all_succeed,
    test_the_bound_is_a_setting,
)
from tests.support.redis_cluster import app_name, redis_url  # noqa: F401
