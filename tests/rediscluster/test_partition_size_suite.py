"""Holding a partition to its size on a Redis Cluster: the suite of
tests/behaviour/test_partition_size.py, on a 3-master cluster."""

from __future__ import annotations

import pytest

from tests.behaviour.test_partition_size import (  # noqa: F401
    app,
    test_a_send_bigger_than_the_size_is_refused_at_once,
    test_a_waiting_send_goes_in_once_the_processor_makes_room,
    test_drop_oldest_counts_what_a_group_never_read,
    test_drop_oldest_without_a_group_counts_nothing,
    test_the_slowest_of_several_groups_is_named,
    test_unread_entries_are_kept_and_the_send_is_refused,
    test_what_every_group_acknowledged_makes_room,
    test_without_a_group_the_size_caps_the_partition,
)
from tests.rediscluster.cluster import RedisClusterProcesses
from tests.rediscluster.on_cluster import app_name  # noqa: F401


@pytest.fixture
def store_url(redis_cluster: RedisClusterProcesses) -> str:
    return redis_cluster.url
