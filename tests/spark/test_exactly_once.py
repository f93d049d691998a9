"""Exactly-once writes: a retried task, a second attempt running beside the first, and a
micro-batch run again from its checkpoint append each row once; without identities
(``exactlyOnce=false``) each of them appends rows twice."""

from __future__ import annotations

import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis

from runnel_spark.source import RunnelDataSource
from tests.support.spark import APP, send, stored, write


def keys_to(stream: Any, ping: Any, partition: int, count: int) -> list[str]:
    """``count`` keys that ``stream`` routes to ``partition``."""
    found = [
        f"k{i}" for i in range(500) if stream.partition_number(ping(key=f"k{i}", n=0)) == partition
    ]
    return found[:count]


def ns(client: redis.Redis, stream: Any) -> list[int]:
    return sorted(record.n for _, _, record in stored(client, stream))


@pytest.mark.parametrize("exactly_once", ["true", "false"])
def test_a_task_retried_after_some_chunks_went_in_appends_each_row_once(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis, exactly_once: str
) -> None:
    stream = streams.flaky
    zero, one, two = (keys_to(stream, streams.Ping, p, 3) for p in (0, 1, 2))
    # Spark partition 0: 30 rows to stream partition 0, then 20 to partition 1, whose
    # appends fail in the task's first attempt (tests/spark/streams.py) after the first
    # three chunks of 10 went in. Spark partition 1 writes to partitions 0 and 2 under a
    # producer of its own, and does not fail.
    rows = [(zero[i % 3], i) for i in range(30)] + [(one[i % 3], i) for i in range(30, 50)]
    rows += [((zero + two)[i % 6], i) for i in range(50, 100)]
    df = spark.sparkContext.parallelize(rows, 2).toDF("key string, n long")
    spark.sparkContext.setLocalProperty("runnel.test.redis", redis_url)
    try:
        write(df, stream, redis_url, chunkSize="10", exactlyOnce=exactly_once)
    finally:
        spark.sparkContext.setLocalProperty("runnel.test.redis", None)

    assert redis_client.type(streams.FLAKY_PARTITION) == b"stream"  # the retry went through
    if exactly_once == "true":
        assert ns(redis_client, stream) == list(range(100))
        for key in zero:  # each key's rows in the order of their task (the two tasks
            # run side by side, so one task's rows may come before or after the other's)
            got = [r.n for _, _, r in stored(redis_client, stream) if r.key == key]
            for task in ([n for n in got if n < 50], [n for n in got if n >= 50]):
                assert task == sorted(task)
    else:  # the first attempt's three chunks are in twice
        assert ns(redis_client, stream) == sorted([*range(100), *range(30)])


@pytest.mark.parametrize("exactly_once", [True, False])
def test_a_second_attempt_running_beside_the_first_appends_nothing_twice(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis, exactly_once: bool
) -> None:
    """What speculation does: a second attempt of a task of the same write, with the same
    rows, running while the first runs. Spark starts speculative copies only on another
    host than the first (never in local mode), so the test runs the two attempts itself:
    the write's writer, made once on the driver as Spark makes it, runs the task in two
    jobs at once, one task each, both Spark partition 0."""
    stream = streams.pings_out
    rows = [(f"k{i % 7}", i) for i in range(2000)]
    df = spark.createDataFrame(rows, "key string, n long").coalesce(1)
    options = {"app": APP, "stream": stream.name, "url": redis_url, "chunkSize": "5"}
    options["exactlyOnce"] = str(exactly_once).lower()
    writer = RunnelDataSource(options).writer(df.schema, False)

    def task(batches: Any) -> Any:
        report = writer.write(batches)
        yield (report.rows, report.duplicates)

    reports: list[Any] = []

    def attempt() -> None:
        reports.extend(df.rdd.mapPartitions(task).collect())

    attempts = [threading.Thread(target=attempt) for _ in range(2)]
    for thread in attempts:
        thread.start()
    for thread in attempts:
        thread.join()

    assert [rows for rows, _ in reports] == [2000, 2000]
    if exactly_once:
        assert ns(redis_client, stream) == list(range(2000))
        assert sum(duplicates for _, duplicates in reports) == 2000
        for key in {k for k, _ in rows}:  # one order per key, the task's
            got = [r.n for _, _, r in stored(redis_client, stream) if r.key == key]
            assert got == sorted(got)
    else:
        assert ns(redis_client, stream) == sorted(2 * list(range(2000)))


def copy_query(spark: Any, url: str, checkpoint: Path, exactly_once: str) -> Any:
    source = (
        spark.readStream.format("runnel")
        .option("app", APP)
        .option("stream", "pings")
        .option("url", url)
        .load()
    )
    return (
        source.writeStream.format("runnel")
        .option("app", APP)
        .option("stream", "pings_out")
        .option("url", url)
        .option("exactlyOnce", exactly_once)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


@pytest.mark.parametrize("exactly_once", ["true", "false"])
def test_a_micro_batch_run_again_from_the_checkpoint_appends_nothing_twice(
    spark: Any,
    streams: ModuleType,
    redis_url: str,
    redis_client: redis.Redis,
    tmp_path: Path,
    exactly_once: str,
) -> None:
    checkpoint = tmp_path / "checkpoint"
    pings = [streams.Ping(key=f"k{i % 5}", n=i) for i in range(300)]
    send(streams.pings, pings[:200])
    query = copy_query(spark, redis_url, checkpoint, exactly_once)
    query.processAllAvailable()
    first_id = query.id
    query.stop()
    assert ns(redis_client, streams.pings_out) == list(range(200))

    # The sink wrote the last micro-batch, and Spark stopped before committing it: the
    # commit is not in the checkpoint, so the restarted query runs that batch again.
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)  # its checksum
    send(streams.pings, pings[200:])
    query = copy_query(spark, redis_url, checkpoint, exactly_once)
    query.processAllAvailable()
    assert query.id == first_id
    query.stop()

    if exactly_once == "true":
        assert ns(redis_client, streams.pings_out) == list(range(300))
    else:
        copied = ns(redis_client, streams.pings_out)
        assert len(copied) > 300 and set(copied) == set(range(300))


def test_an_idempotency_key_column_appends_a_key_once_across_writes(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis
) -> None:
    stream = streams.pings_out
    df = spark.createDataFrame(
        [(f"k{i % 3}", i, f"id{i}") for i in range(40)], "key string, n long, id string"
    )
    write(df, stream, redis_url, idempotencyKey="id")
    write(df, stream, redis_url, idempotencyKey="id")  # a new write: its keys are in
    assert ns(redis_client, stream) == list(range(40))
    write(df, stream, redis_url)  # numbered by a new write: appended again
    assert ns(redis_client, stream) == sorted(2 * list(range(40)))


def test_a_stream_with_an_idempotency_key_keys_each_row_by_it(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis
) -> None:
    send(streams.keyed, [streams.Ping(key="a", n=3)])
    df = spark.createDataFrame([(f"k{i % 3}", i) for i in range(10)], "key string, n long")
    write(df, streams.keyed, redis_url)
    write(df, streams.keyed, redis_url)
    assert ns(redis_client, streams.keyed) == list(range(10))  # n=3 once: sent before


def test_write_options_are_checked_before_any_task_runs(
    spark: Any, streams: ModuleType, redis_url: str
) -> None:
    df = spark.createDataFrame([("a", 1)], "key string, n long")
    with pytest.raises(Exception, match="option exactlyonce='maybe' must be true or false"):
        write(df, streams.pings_out, redis_url, exactlyOnce="maybe")
    with pytest.raises(Exception, match="idempotencyKey='id' names no column of the DataFrame"):
        write(df, streams.pings_out, redis_url, idempotencyKey="id")
    with pytest.raises(Exception, match="exactlyOnce=false turns off: give one or the other"):
        write(df, streams.pings_out, redis_url, idempotencyKey="n", exactlyOnce="false")
