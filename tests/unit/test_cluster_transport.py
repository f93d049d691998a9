"""Choosing the Redis transport and key layout from the URL and settings (no server)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from runnel.exceptions import Misconfigured
from runnel.settings import Settings
from runnel.store.log import PartitionId
from runnel.store.resolve import backend_for
from runnel.text import runs as _spans
from runnel_redis.cluster import RedisClusterTransport, client_url
from runnel_redis.cluster_log import ClusterLog
from runnel_redis.transport import RedisTransport


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis+cluster://h:7000", "redis://h:7000"),
        ("rediss+cluster://u:p@h:7000", "rediss://u:p@h:7000"),
        ("REDIS+CLUSTER://h:7000", "redis://h:7000"),
    ],
)
def test_client_url_drops_the_cluster_mark(url: str, expected: str) -> None:
    assert client_url(url) == expected


async def test_the_scheme_picks_the_transport_and_the_layout() -> None:
    single = backend_for("redis://127.0.0.1:1/0", Settings())
    cluster = backend_for("redis+cluster://127.0.0.1:1", Settings())
    assert type(single) is RedisTransport and single.key_layout == "classic"
    assert isinstance(cluster, RedisClusterTransport) and cluster.key_layout == "cluster"
    partition = PartitionId("shop", "orders", 3)
    assert single.partition_key(partition) == "__strm:shop.orders.3"
    assert cluster.partition_key(partition) == "__strm:{shop.orders.3}"
    await single.aclose()
    await cluster.aclose()


async def test_a_single_redis_can_take_the_cluster_layout() -> None:
    t = backend_for("redis://127.0.0.1:1/0", Settings(redis_key_layout="cluster"))
    assert t.key_layout == "cluster"
    assert t.partition_key(PartitionId("shop", "orders", 3)) == "__strm:{shop.orders.3}"
    await t.aclose()


def test_a_cluster_refuses_the_classic_layout() -> None:
    with pytest.raises(Misconfigured, match="cluster key layout"):
        backend_for("redis+cluster://127.0.0.1:1", Settings(redis_key_layout="classic"))


def test_bad_layout_and_wait_settings_are_refused() -> None:
    with pytest.raises(ValidationError):
        Settings(redis_key_layout="sharded")
    with pytest.raises(ValidationError):
        Settings(wait_replicas=-1)
    with pytest.raises(ValidationError):
        Settings(wait_timeout=0)


async def test_spark_on_a_cluster_gets_the_cluster_log() -> None:
    """Spark's sync log on a cluster keys partitions by the cluster layout, and pickles as
    its URL (the layout follows from the scheme); the password is never shown."""
    cluster = backend_for(
        "redis+cluster://user:secret@127.0.0.1:1", Settings(wait_replicas=1, wait_timeout=2)
    )
    try:
        log = cluster.sync_log()
        assert isinstance(log, ClusterLog)
        copy = pickle.loads(pickle.dumps(log))
        assert isinstance(copy, ClusterLog) and copy.url == log.url
        assert (copy.wait_replicas, copy.wait_timeout_ms) == (1, 2000)
        assert copy._key(PartitionId("a", "s", 2)) == "__strm:{a.s.2}"
        assert "secret" not in repr(copy)
    finally:
        await cluster.aclose()


async def test_a_single_redis_log_follows_a_chosen_layout() -> None:
    """A single Redis given the cluster layout (redis_key_layout) reads and writes the
    same keys from Spark; the layout travels with the pickled log."""
    single = backend_for("redis://127.0.0.1:1", Settings(redis_key_layout="cluster"))
    classic = backend_for("redis://127.0.0.1:1", Settings())
    try:
        copy = pickle.loads(pickle.dumps(single.sync_log()))
        assert copy._key(PartitionId("a", "s", 2)) == "__strm:{a.s.2}"
        plain = pickle.loads(pickle.dumps(classic.sync_log()))
        assert plain._key(PartitionId("a", "s", 2)) == "__strm:a.s.2"
    finally:
        await single.aclose()
        await classic.aclose()


@given(st.sets(st.integers(0, 60)))
def test_spans_name_every_index_once_in_runs(numbers: set[int]) -> None:
    text = _spans(sorted(numbers))
    named: list[int] = []
    for part in filter(None, text.split(", ")):
        first, _, last = part.partition("-")
        named += range(int(first), int(last or first) + 1)
    assert named == sorted(numbers)
    runs = sum(1 for n in numbers if n - 1 not in numbers)  # as few parts as can be
    assert len(list(filter(None, text.split(", ")))) == runs


def test_spans_read_as_runs() -> None:
    assert _spans([0, 1, 2, 5, 7, 8, 9]) == "0-2, 5, 7-9"
    assert _spans([]) == ""
