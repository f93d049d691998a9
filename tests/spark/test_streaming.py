"""Structured Streaming: offsets in Spark's checkpoint, a restart, and the stream sink."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import redis

from tests.support.spark import APP, send, stored


def copy_query(spark: Any, url: str, checkpoint: Path) -> Any:
    """pings -> pings_out, through Spark, remembering where it got to in ``checkpoint``."""
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
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def test_a_restarted_query_misses_and_repeats_nothing(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "checkpoint"
    first = [streams.Ping(key=f"k{i % 5}", n=i) for i in range(200)]
    send(streams.pings, first)

    query = copy_query(spark, redis_url, checkpoint)
    query.processAllAvailable()
    query.stop()
    copied = [r for _, _, r in stored(redis_client, streams.pings_out)]
    assert sorted(copied, key=lambda p: p.n) == first

    # Offsets are the last id read in each partition, kept in the checkpoint.
    offsets = sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    last = json.loads(offsets[-1].read_text().splitlines()[-1])
    expected = {
        str(n): ids[-1][0].decode() if (ids := redis_client.xrevrange(key, count=1)) else "0-0"
        for n, key in enumerate(f"__strm:sparkt.pings.{n}" for n in range(4))
    }
    assert last == expected

    second = [streams.Ping(key=f"k{i % 5}", n=i) for i in range(200, 350)]
    send(streams.pings, second)
    query = copy_query(spark, redis_url, checkpoint)
    query.processAllAvailable()
    query.stop()

    copied = [r for _, _, r in stored(redis_client, streams.pings_out)]
    assert sorted(copied, key=lambda p: p.n) == first + second  # each event exactly once
    for key in {p.key for p in copied}:  # and each key's events in the order sent
        ns = [p.n for p in copied if p.key == key]
        assert ns == sorted(ns)
    # No consumer group was needed on the source.
    assert all(
        redis_client.xinfo_groups(f"__strm:sparkt.pings.{n}") == []
        for n in range(4)
        if redis_client.exists(f"__strm:sparkt.pings.{n}")
    )


def test_latest_starts_after_what_is_there(
    spark: Any, streams: ModuleType, redis_url: str, tmp_path: Path
) -> None:
    from tests.spark.test_batch import orders

    sent = orders(streams, 20)
    send(streams.orders_avro, sent[:10])
    query = (
        spark.readStream.format("runnel")
        .option("app", APP)
        .option("stream", streams.orders_avro.name)
        .option("url", redis_url)
        .option("startingOffsets", "latest")
        .load()
        .writeStream.format("memory")
        .queryName("latest_orders")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
        send(streams.orders_avro, sent[10:])
        query.processAllAvailable()
        rows = spark.sql("select order_id, items, created_at from latest_orders").collect()
    finally:
        query.stop()
    assert sorted(r.order_id for r in rows) == list(range(10, 20))
    by_id = {r.order_id: r for r in rows}
    for record in sent[10:]:
        row = by_id[record.order_id]
        assert [i.asDict() for i in row.items] == [i.model_dump() for i in record.items]
        assert row.created_at.timestamp() == record.created_at.timestamp()


def test_available_now_drains_in_bounded_micro_batches_and_stops(
    spark: Any, streams: ModuleType, redis_url: str, tmp_path: Path
) -> None:
    sent = [streams.Ping(key=f"k{i % 7}", n=i) for i in range(100)]
    send(streams.pings, sent)
    query = (
        spark.readStream.format("runnel")
        .option("app", APP)
        .option("stream", "pings")
        .option("url", redis_url)
        .option("maxEntriesPerTrigger", "30")
        .load()
        .writeStream.format("memory")
        .queryName("drained_pings")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()  # stops by itself once what was there is read
    rows = spark.sql("select n from drained_pings").collect()
    assert sorted(r.n for r in rows) == list(range(100))
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(batches) == 100
    assert max(batches) <= 30 and len(batches) >= 4
