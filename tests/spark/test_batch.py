"""Batch reads and writes on a local Spark session against the session's redis-server."""

from __future__ import annotations

import datetime
import decimal
import math
from types import ModuleType
from typing import Any

import pytest
import redis

from runnel.record import Record
from runnel_spark import check_rows
from tests.support.spark import APP, reader, send, stored, write


def orders(streams: ModuleType, count: int) -> list[Record]:
    return [
        streams.Order(
            order_id=i,
            customer=f"c{i % 7}",
            status="paid" if i % 2 else "new",
            size=streams.Size.LARGE if i % 3 else streams.Size.SMALL,
            created_at=datetime.datetime(2024, 5, 1, 12, i % 60, tzinfo=datetime.UTC),
            day=datetime.date(2024, 5, 1 + i % 28),
            items=[
                streams.Item(sku=f"s{j}", quantity=j + 1, price=decimal.Decimal(f"{i}.{j}5"))
                for j in range(i % 3)
            ],
            tags={"n": i} if i % 2 else {},
            note=None if i % 4 else f"note {i}",
            blob=bytes([i % 128, 0]),
            ratio=i / 7,
        )
        for i in range(count)
    ]


@pytest.mark.parametrize("codec", ["json", "msgpack", "json+gzip", "avro"])
def test_round_trip_through_read_and_write(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis, codec: str
) -> None:
    source, target = streams.orders[codec], streams.orders_out[codec]
    sent = orders(streams, 120)
    send(source, sent)

    df = reader(spark, source, redis_url)
    assert df.count() == 120
    write(df, target, redis_url)

    copied = stored(redis_client, target)
    assert sorted((r for _, _, r in copied), key=lambda r: r.order_id) == sent
    # Routed as Python producers route: each record where stream.send puts it, and in
    # the same order within its partition (the source was read one partition per task).
    original = stored(redis_client, source)
    assert [(n, r) for n, _, r in copied] == [(n, r) for n, _, r in original]
    assert all(n == target.partition_number(r) for n, _, r in copied)


def test_primitive_records_round_trip(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis
) -> None:
    sent = [streams.Click(user=f"u{i % 5}", n=i, ok=bool(i % 2), score=i / 4) for i in range(40)]
    send(streams.clicks, sent)
    write(reader(spark, streams.clicks, redis_url), streams.clicks_out, redis_url)
    copied = stored(redis_client, streams.clicks_out)
    assert sorted((r for _, _, r in copied), key=lambda r: r.n) == sent
    # Stored as native field/value pairs, as Python producers store them.
    key = f"__strm:sparkt.clicks_out.{copied[0][0]}"
    [(_, fields)] = redis_client.xrange(key, count=1)
    assert set(fields) == {b"user", b"n", b"ok", b"score"}


def test_columns_and_meta_columns(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis
) -> None:
    sent = orders(streams, 30)
    send(streams.orders_avro, sent)
    rows = reader(spark, streams.orders_avro, redis_url).collect()
    # Ids are unique within a partition only.
    entries = {(n, xid): r for n, xid, r in stored(redis_client, streams.orders_avro)}
    assert len(rows) == 30
    assert {(row["_partition"], row["_id"]) for row in rows} == set(entries)
    for row in rows:
        record = entries[(row["_partition"], row["_id"])]
        ms = int(row["_id"].split("-")[0])
        assert row["_timestamp"].timestamp() * 1000 == pytest.approx(ms)
        assert row["order_id"] == record.order_id
        assert row["status"] == record.status.value
        assert row["size"] == record.size.name  # values of mixed types: by name
        assert [i.asDict() for i in row["items"]] == [i.model_dump() for i in record.items]
        assert row["tags"] == record.tags and bytes(row["blob"]) == record.blob
        assert row["note"] == record.note and row["day"] == record.day


def test_id_range_and_splits(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis
) -> None:
    # One key, so one partition holds everything; explicit ids spread over 2 seconds.
    key = "__strm:sparkt.pings.0"
    for i in range(1, 201):
        redis_client.xadd(key, {"data": f'{{"key": "k", "n": {i}}}'}, id=f"{1000 * i}-0")
    everything = reader(spark, streams.pings, redis_url, splitSize="30")
    assert everything.rdd.getNumPartitions() >= 6
    assert sorted(r["n"] for r in everything.collect()) == list(range(1, 201))

    some = reader(spark, streams.pings, redis_url, start="50000", end="59000-0").collect()
    assert sorted(r["n"] for r in some) == list(range(50, 60))
    assert reader(spark, streams.pings, redis_url, start="999999").count() == 0


def test_stream_option_as_an_import_path(spark: Any, streams: ModuleType, redis_url: str) -> None:
    send(streams.pings, [streams.Ping(key="a", n=1)])
    df = (
        spark.read.format("runnel")
        .option("stream", "tests.spark.streams:pings")
        .option("url", redis_url)
        .load()
    )
    assert [(r.key, r.n) for r in df.select("key", "n").collect()] == [("a", 1)]


def bad_rows_df(spark: Any) -> Any:
    rows = [("k1", "1"), ("k2", "2"), ("k3", "three"), (None, "4"), ("k5", "5")]
    return spark.createDataFrame(rows, "key string, n string").coalesce(1)


def test_bad_rows_fail_the_task_and_nothing_of_it_is_written(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis
) -> None:
    with pytest.raises(Exception) as failure:
        write(bad_rows_df(spark), streams.pings_out, redis_url)
    message = str(failure.value)
    assert "row 3 of Spark partition 0" in message
    assert (
        'n: input should be a valid integer, unable to parse string as an integer (got "three")'
        in message
    )
    assert "nothing of this task was written" in message
    assert stored(redis_client, streams.pings_out) == []

    # A row without its partition key.
    df = spark.createDataFrame([("k1", 1), (None, 2), ("k3", 3)], "key string, n long")
    with pytest.raises(Exception) as failure:
        write(df.coalesce(1), streams.pings_out, redis_url)
    message = str(failure.value)
    assert "row 2 of Spark partition 0 (attempt 3) is not a valid Ping: " in message
    assert 'key: input should be a valid string (got null); the row: {"key": null' in message
    assert stored(redis_client, streams.pings_out) == []


def test_a_nan_to_a_json_stream_fails_the_task_and_msgpack_carries_it(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis
) -> None:
    """Before, the NaN was written as null: an event no processor could decode."""
    rows = [("a", 1.5), ("b", float("nan")), ("c", float("-inf"))]
    df = spark.createDataFrame(rows, "key string, value double").coalesce(1)
    with pytest.raises(Exception) as failure:
        write(df, streams.readings["json"], redis_url)
    message = str(failure.value)
    assert "row 2 of Spark partition 0 (attempt 3) cannot be routed or encoded" in message
    assert "value: nan: JSON has no NaN or infinity" in message
    assert "nothing of this task was written" in message
    assert stored(redis_client, streams.readings["json"]) == []

    write(df, streams.readings["msgpack"], redis_url)
    back = {r.key: r.value for _, _, r in stored(redis_client, streams.readings["msgpack"])}
    assert back["a"] == 1.5 and math.isnan(back["b"]) and back["c"] == -math.inf


def test_check_rows_reports_every_bad_row(spark: Any, streams: ModuleType) -> None:
    checked = check_rows(bad_rows_df(spark), app=APP, stream="pings_out")
    assert (checked.rows, checked.bad, checked.ok) == (5, 2, False)
    assert '(got "three")' in checked.errors[0]
    assert "key: input should be a valid string (got null)" in checked.errors[1]
    assert '"key": null' in checked.errors[1]  # the row itself is quoted


def test_append_only_and_required_columns(spark: Any, streams: ModuleType, redis_url: str) -> None:
    df = spark.createDataFrame([("k", 1)], "key string, n long")
    with pytest.raises(Exception, match="append-only"):
        (
            df.write.format("runnel")
            .mode("overwrite")
            .option("app", APP)
            .option("stream", "pings_out")
            .option("url", redis_url)
            .save()
        )
    with pytest.raises(Exception, match="has no column n"):
        write(df.select("key"), streams.pings_out, redis_url)


def test_unknown_stream_is_reported(spark: Any, redis_url: str) -> None:
    with pytest.raises(Exception, match="declares no stream 'nope'"):
        spark.read.format("runnel").option("app", APP).option("stream", "nope").load()


def test_a_task_failing_while_sending_says_how_far_it_got(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis
) -> None:
    # 30 rows for partition 0, then rows for partition 1, whose key is made unwritable.
    stream = streams.pings_out
    keys = [f"k{i}" for i in range(200)]
    first = [k for k in keys if stream.partition_number(streams.Ping(key=k, n=0)) == 0][:3]
    then = [k for k in keys if stream.partition_number(streams.Ping(key=k, n=0)) == 1][:1]
    rows = [(first[i % 3], i) for i in range(30)] + [(then[0], i) for i in range(30, 50)]
    redis_client.set("__strm:sparkt.pings_out.1", "not a stream")
    df = spark.createDataFrame(rows, "key string, n long").coalesce(1)
    with pytest.raises(Exception) as failure:
        write(df, stream, redis_url, chunkSize="10")
    assert (
        "appending the 50 rows of Spark partition 0 (attempt 3) failed after 30: rows 1-30 "
        "are in the stream, rows 31-40 (the chunk in flight, appended all or none) may be, "
        "the rest are not"
    ) in str(failure.value)
    assert "a retry of the task appends only the rows not in yet" in str(failure.value)
    # Its four attempts appended rows 1-30 once.
    written = redis_client.xrange("__strm:sparkt.pings_out.0")
    assert [stream.decode(fields).n for _, fields in written] == list(range(30))


def test_a_task_failing_on_its_first_chunk_says_no_row_is_in(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis
) -> None:
    stream = streams.pings_out
    keys = [f"k{i}" for i in range(200)]
    [key] = [k for k in keys if stream.partition_number(streams.Ping(key=k, n=0)) == 1][:1]
    redis_client.set("__strm:sparkt.pings_out.1", "not a stream")
    df = spark.createDataFrame([(key, i) for i in range(20)], "key string, n long").coalesce(1)
    with pytest.raises(Exception) as failure:
        write(df, stream, redis_url, chunkSize="10")
    assert (
        "appending the 20 rows of Spark partition 0 (attempt 3) failed after 0: no row is in "
        "the stream yet, rows 1-10 (the chunk in flight, appended all or none) may be, the "
        "rest are not"
    ) in str(failure.value)


def test_plain_json_chunks_read_as_pydantic_reads_them(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis
) -> None:
    # Chunks of two: some Arrow decodes whole, others hold an entry pydantic converts.
    key = "__strm:sparkt.pings.0"
    values = [
        '{"key": "a", "n": 1}',
        '{"key": "b", "n": 2, "extra": [null, {}]}',
        '{"key": "c", "n": "3"}',
        '{"key": "d", "n": 4}',
        '{"key": "e", "n": 5.0}',
        "null",
        '{"key": "f", "n": 6}',
    ]
    ids = [redis_client.xadd(key, {"data": v}).decode() for v in values[:5]]
    rows = reader(spark, streams.pings, redis_url, chunkSize="2").collect()
    assert [(r.key, r.n, r._id) for r in rows] == list(
        zip("abcde", [1, 2, 3, 4, 5], ids, strict=True)
    )

    bad = redis_client.xadd(key, {"data": values[5]}).decode()
    redis_client.xadd(key, {"data": values[6]})
    with pytest.raises(Exception) as failure:
        reader(spark, streams.pings, redis_url, chunkSize="2").collect()
    assert f"cannot read entry {bad} of sparkt.pings partition 0" in str(failure.value)
