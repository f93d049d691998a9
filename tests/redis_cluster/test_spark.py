"""runnel-spark on a real 3-master Redis Cluster: the cluster's sync log, then Spark itself.

The log is tested directly first (extents, pages, bounds, appends split by partition and a
part refused); then a local Spark session (tests/support/spark.py's) writes a DataFrame
into a stream on the cluster and reads it back, as a batch and as an availableNow stream.
"""

from __future__ import annotations

import importlib
import pickle
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from redis.cluster import RedisCluster

from runnel.exceptions import NotReplicated
from runnel.settings import Settings
from runnel.store.log import PartitionId
from runnel.store.resolve import backend_for
from runnel.store.synclog import LogError, PartlyAppended, next_id
from runnel_redis.cluster import client_url
from runnel_redis.cluster_log import ClusterLog
from runnel_redis.layout import Cluster, hash_tag
from tests.support.redis_cluster import RedisClusterProcesses
from tests.support.spark import APP, reader, spark, write

__all__ = ["spark"]  # the session fixture, shared with tests/spark

LAYOUT = Cluster()


@pytest.fixture
def client(redis_cluster_url: str) -> Iterator[RedisCluster]:
    cluster = RedisCluster.from_url(client_url(redis_cluster_url))
    yield cluster
    cluster.close()


@pytest.fixture
def log(redis_cluster_url: str) -> Iterator[ClusterLog]:
    log = ClusterLog(redis_cluster_url)
    yield log
    log.close()


def nodes_of(client: RedisCluster, partitions: list[PartitionId]) -> set[str]:
    return {client.get_node_from_key(LAYOUT.partition(*p)).name for p in partitions}


def test_the_log_appends_reads_and_bounds_across_masters(
    log: ClusterLog, client: RedisCluster
) -> None:
    parts = [PartitionId("app", "s", n) for n in range(6)]
    assert len(nodes_of(client, parts)) > 1, "the partitions should span masters"
    # One chunk over every partition, interleaved: each partition's entries keep their order.
    log.append([(parts[i % 5], {b"data": str(i).encode()}) for i in range(50)], maxlen=1000)
    log.append([(parts[0], {b"data": str(n).encode()}) for n in range(50, 60)])

    extents = log.extents(parts)
    for n, extent in enumerate(extents[:5]):
        ids = [x.decode() for x, _ in client.xrange(LAYOUT.partition(*parts[n]))]
        assert (extent.length, extent.first, extent.last) == (len(ids), ids[0], ids[-1])
    assert extents[0].length == 20 and extents[5].length == 0 and extents[5].first is None

    key = LAYOUT.partition(*parts[0])
    ids = [x.decode() for x, _ in client.xrange(key)]
    pages = list(log.read(parts[0], ids[1], ids[18], 5))
    assert [len(p) for p in pages] == [5, 5, 5, 3]
    expected = [str(i).encode() for i in [*range(0, 50, 5), *range(50, 60)]]
    assert [f[b"data"] for page in pages for _, f in page] == expected[1:19]
    assert list(log.read(parts[0], next_id(ids[-1]), "+", 5)) == []

    ids1 = [x.decode() for x, _ in client.xrange(LAYOUT.partition(*parts[1]))]
    bounds = [(parts[0], ids[2], "+", 4), (parts[1], "0-0", "+", 100), (parts[5], "0-0", "+", 3)]
    assert log.nth_ids(bounds) == [ids[5], ids1[-1], None]

    # Pickled for Spark's executors: the URL alone, the cluster layout follows from it.
    copy = pickle.loads(pickle.dumps(log))
    try:
        assert copy.url == log.url and copy.extents(parts) == extents
    finally:
        copy.close()


def test_a_refused_part_names_the_partitions_written(log: ClusterLog, client: RedisCluster) -> None:
    parts = [PartitionId("app", "t", n) for n in range(4)]
    client.set(LAYOUT.partition(*parts[2]), "not a stream")
    chunk = [(parts[i % 4], {b"data": str(i).encode()}) for i in range(20)]
    with pytest.raises(PartlyAppended) as caught:
        log.append(chunk)
    failure = caught.value
    assert failure.written == [parts[0], parts[1], parts[3]]
    assert failure.refused == [parts[2]] and failure.unknown == []
    assert "app.t [0, 1, 3] are in the store" in str(failure)
    assert "app.t [2] were not written" in str(failure) and "WRONGTYPE" in str(failure)
    for n in (0, 1, 3):
        stored = [f[b"data"] for _, f in client.xrange(LAYOUT.partition(*parts[n]))]
        assert stored == [str(i).encode() for i in range(n, 20, 4)]

    # Nothing written at all: a plain LogError, and nothing in the store.
    with pytest.raises(LogError) as only:
        log.append([(parts[2], {b"data": b"x"})])
    assert not isinstance(only.value, PartlyAppended)


def test_the_log_of_a_cluster_transport(redis_cluster_url: str) -> None:
    transport = backend_for(redis_cluster_url, Settings())
    log = transport.sync_log()
    try:
        assert isinstance(log, ClusterLog) and log.url == redis_cluster_url
        assert hash_tag(log._key(PartitionId("a", "s", 1))) == "a.s.1"
    finally:
        log.close()


def test_appends_wait_for_replicas_when_asked(
    redis_cluster_replicas: RedisClusterProcesses,
) -> None:
    parts = [PartitionId("app", "w", n) for n in range(4)]
    chunk = [(parts[i % 4], {b"data": str(i).encode()}) for i in range(12)]
    # The setting travels with the pickled log: Spark's executors wait too.
    log = pickle.loads(pickle.dumps(ClusterLog(redis_cluster_replicas.url, 1, 5000)))
    more = ClusterLog(redis_cluster_replicas.url, 2, 50)  # one replica per master only
    try:
        assert log.wait_replicas == 1
        log.append(chunk)
        with pytest.raises(NotReplicated, match=r"\(master .*only 1 of the 2 replicas"):
            more.append(chunk)
        assert sum(e.length for e in log.extents(parts)) == 24  # in, though not replicated enough
    finally:
        log.close()
        more.close()


@pytest.fixture
def streams(redis_cluster: RedisClusterProcesses) -> Iterator[ModuleType]:
    """tests/spark's streams, their app pointed at the cluster for the test."""
    module = importlib.import_module("tests.spark.streams")
    saved = module.app.settings.redis_url
    module.app.settings.redis_url = redis_cluster.url
    yield module
    module.app.settings.redis_url = saved


def test_spark_writes_a_dataframe_to_the_cluster_and_reads_it_back(
    spark: Any, streams: ModuleType, redis_cluster_url: str, client: RedisCluster, tmp_path: Path
) -> None:
    stream = streams.pings
    keys = [f"k{i}" for i in range(24)]
    rows = [(keys[i % len(keys)], i) for i in range(600)]
    # Each key's rows in one task, in order: then the stream keeps each key's order.
    df = (
        spark.createDataFrame(rows, "key string, n long")
        .repartition(3, "key")
        .sortWithinPartitions("key", "n")
    )
    write(df, stream, redis_cluster_url, chunkSize="50")

    parts = [PartitionId(stream.app.name, stream.name, n) for n in range(stream.partition_count)]
    assert len(nodes_of(client, parts)) > 1
    assert sum(client.xlen(LAYOUT.partition(*p)) for p in parts) == len(rows)

    def check(got: list[Any]) -> None:
        assert sorted((r.key, r.n) for r in got) == sorted(rows)
        by_key: dict[str, list[Any]] = {}
        for r in sorted(got, key=lambda r: (r._partition, tuple(map(int, r._id.split("-"))))):
            by_key.setdefault(r.key, []).append(r)
        for key, seen in by_key.items():
            assert [r.n for r in seen] == sorted(r.n for r in seen), key
            assert {r._partition for r in seen} == {
                stream.partition_number(streams.Ping(key=key, n=0))
            }

    check(reader(spark, stream, redis_cluster_url, chunkSize="40", splitSize="70").collect())

    query = (
        spark.readStream.format("runnel")
        .option("app", APP)
        .option("stream", stream.name)
        .option("url", redis_cluster_url)
        .load()
        .writeStream.format("memory")
        .queryName("cluster_pings")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    check(spark.sql("select * from cluster_pings").collect())


def test_a_task_failing_part_way_says_which_partitions_of_the_chunk_are_in(
    spark: Any, streams: ModuleType, redis_cluster_url: str, client: RedisCluster
) -> None:
    # 30 rows for partition 0, then a chunk mixing partitions 0 and 1; 1 is unwritable.
    stream = streams.pings_out
    keys = [f"k{i}" for i in range(200)]
    zero = [k for k in keys if stream.partition_number(streams.Ping(key=k, n=0)) == 0][:3]
    one = next(k for k in keys if stream.partition_number(streams.Ping(key=k, n=0)) == 1)
    rows = [(zero[i % 3], i) for i in range(30)]
    rows += [(zero[0] if i % 2 else one, i) for i in range(30, 40)]
    client.set(LAYOUT.partition("sparkt", "pings_out", 1), "not a stream")
    df = spark.createDataFrame(rows, "key string, n long").coalesce(1)
    with pytest.raises(Exception) as failure:
        write(df, stream, redis_cluster_url, chunkSize="10")
    assert (
        "appending the 40 rows of Spark partition 0 (attempt 3) failed after 30: rows 1-30 "
        "are in the stream; of rows 31-40 (the chunk in flight) those to stream partitions 0 "
        "are in, those to stream partitions 1 are not; the rest are not"
    ) in str(failure.value)
    written = client.xrange(LAYOUT.partition("sparkt", "pings_out", 0))
    expected = [*range(30), *range(31, 40, 2)]
    assert [stream.decode(fields).n for _, fields in written] == expected
