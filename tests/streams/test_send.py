"""Sending: what a batch leaves in Redis (one script appends it, whole or not at all)."""

from __future__ import annotations

import pytest
import redis

from runnel import App, Record
from runnel.exceptions import EncodeError
from tests.support.apps import make_app


class Ping(Record):
    key: str
    n: int


class Point(Record, primitive=True):
    x: int
    y: int


def _entries(client: redis.Redis, key: str) -> list[tuple[bytes, dict[bytes, bytes]]]:
    return [(xid, fields) for xid, fields in client.xrange(key)]


async def test_a_batch_lands_in_order_in_its_partitions(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=4)
    records = [Ping(key=f"k{i % 9}", n=i) for i in range(500)]
    ids = await pings.send(*records)
    assert len(ids) == len(records)
    for partition in pings.partitions:
        stored = _entries(redis_client, partition.key)
        mine = [
            (xid, r)
            for xid, r in zip(ids, records, strict=True)
            if pings.partition_for(r) is partition
        ]
        assert [xid for xid, _ in stored] == [xid for xid, _ in mine]  # same ids, same order
        assert [pings.decode(fields) for _, fields in stored] == [r for _, r in mine]
    await app.aclose()


async def test_a_record_with_several_fields(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """Primitive records keep one stream field per record field, in a batch as alone."""
    app = make_app(app_name, redis_url)
    points = app.stream("points", record=Point, partition_by="x", partition_count=2)
    await points.send(*[Point(x=i, y=-i) for i in range(10)])
    await points.send(Point(x=99, y=1))
    stored = [f for p in points.partitions for _, f in _entries(redis_client, p.key)]
    assert sorted((int(f[b"x"]), int(f[b"y"])) for f in stored) == sorted(
        [(i, -i) for i in range(10)] + [(99, 1)]
    )
    await app.aclose()


async def test_sends_trim_partitions_to_about_partition_size(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream(
        "pings", record=Ping, partition_by="key", partition_count=1, partition_size=10
    )
    for _ in range(5):
        await pings.send(*[Ping(key="k", n=i) for i in range(300)])
    length = redis_client.xlen(pings.partitions[0].key)
    assert 10 <= length < 1500  # "~": Redis trims whole nodes, never below the size
    await app.aclose()


async def test_a_batch_is_sent_whole_or_not_at_all(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """One partition key holds something else: the send fails and no partition got any
    of the batch, not even those written before the bad one would have been."""
    app: App = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=4)
    records = [Ping(key=f"k{i}", n=i) for i in range(40)]
    bad = pings.partitions[-1].key
    redis_client.set(bad, "not a stream")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        await pings.send(*records)
    assert all(redis_client.xlen(p.key) == 0 for p in pings.partitions[:-1])
    assert redis_client.get(bad) == b"not a stream"
    await app.aclose()


class Blob(Record):
    key: str
    payload: bytes


async def test_a_record_that_cannot_be_encoded_is_named_and_nothing_sent(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """Bytes that are not UTF-8 cannot go into JSON: one clear error naming the stream,
    the record and a way out, and none of the batch is sent."""
    app = make_app(app_name, redis_url)
    blobs = app.stream("blobs", record=Blob, partition_by="key", partition_count=2)
    good = [Blob(key=f"k{i}", payload=b"fine") for i in range(3)]
    with pytest.raises(EncodeError) as caught:
        await blobs.send(*good, Blob(key="k9", payload=b"\xff\x00"), *good)
    message = str(caught.value)
    assert f"stream '{app_name}.blobs': cannot encode Blob (record 4 of 7)" in message
    assert "nothing was sent" in message and "msgpack or avro" in message
    assert all(redis_client.xlen(p.key) == 0 for p in blobs.partitions)

    packed = app.stream("packed", record=Blob, partition_by="key", serializer="msgpack")
    await packed.send(Blob(key="k9", payload=b"\xff\x00"))  # binary serializers carry it
    await app.aclose()
