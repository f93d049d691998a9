"""Stream tests in one process (tests/streams), written for a single Redis, run again on a
Redis Cluster.

Only tests that name keys through the app (``partition.key``) and use plain single-key
commands on ``redis_client`` are taken: the fixtures below give them a cluster URL and a
cluster client, and the test bodies are those of tests/streams.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis.cluster import RedisCluster

from tests.streams.test_acks import (  # noqa: F401
    test_failed_event_is_not_acknowledged_and_comes_back_first,
    test_graceful_stop_acknowledges_what_was_processed,
)
from tests.streams.test_batching import (  # noqa: F401
    test_a_batch_is_acknowledged_as_a_whole_after_its_iteration,
    test_batches_are_bounded_and_in_order,
)
from tests.streams.test_flow import test_events_flow_in_order  # noqa: F401
from tests.streams.test_health import check_probes
from tests.streams.test_lost_store import (  # noqa: F401
    test_a_worker_reads_on_after_the_store_lost_its_groups,
)
from tests.streams.test_ordering import (  # noqa: F401
    test_order_per_partition_and_exactly_once,
    test_processors_of_one_stream_each_get_every_event,
)
from tests.streams.test_send import (  # noqa: F401
    test_a_batch_lands_in_order_in_its_partitions,
    test_a_record_with_several_fields,
)
from tests.support.redis_cluster import RedisClusterProcesses, app_name, redis_url  # noqa: F401


@pytest.fixture
def redis_client(redis_cluster: RedisClusterProcesses) -> Iterator[RedisCluster]:
    client = RedisCluster.from_url(redis_cluster.redis_url)
    yield client
    client.close()


async def test_probes_of_a_worker_on_a_cluster(
    redis_url: str,  # noqa: F811
    app_name: str,  # noqa: F811
) -> None:
    """tests/streams/test_health.py's probes, the worker on the cluster."""
    await check_probes(redis_url, app_name)
