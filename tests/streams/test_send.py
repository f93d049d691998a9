"""Sending: what a batch leaves in Redis (one script appends it, whole or not at all), and
what a send whose reply was lost leaves (each record once, under its call's identity)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
import redis

from runnel import App, Record
from runnel.exceptions import EncodeError, IdentityError, NotConnected, Unavailable
from tests.support.apps import make_app
from tests.support.proxy import Proxy


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


# A reply lost on the way back: Redis ran the append, the sender never heard.


@pytest.fixture
def proxy(redis_url: str) -> Iterator[Proxy]:
    url = urlparse(redis_url)
    p = Proxy(url.hostname or "127.0.0.1", url.port or 6379)
    yield p
    p.close()


async def test_a_send_whose_reply_was_lost_returns_the_original_ids(
    proxy: Proxy, app_name: str, redis_client: redis.Redis
) -> None:
    """The connection drops with the append's reply in flight: the send is sent again
    under its call's identity, appends nothing twice, and returns the ids of the first
    time, as if nothing had happened."""
    app = make_app(app_name, proxy.url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=4)
    await pings.send(Ping(key="warm", n=-1))  # connected, the script loaded
    records = [Ping(key=f"k{i}", n=i) for i in range(200)]
    proxy.arm(f"__strm:{app_name}.pings.".encode())
    ids = await pings.send(*records)
    assert proxy.dropped.is_set()
    assert ids.duplicates > 0  # the second time found the call in
    for partition in pings.partitions:
        stored = _entries(redis_client, partition.key)
        mine = [
            (xid, r)
            for xid, r in zip(ids, records, strict=True)
            if pings.partition_for(r) is partition
        ]
        # Each record once, in order, under the id the send returned (the warm-up aside).
        assert [(xid, r) for xid, f in stored if (r := pings.decode(f)).n >= 0] == mine
    await app.aclose()


async def test_without_idempotent_sends_a_lost_reply_is_the_callers_doubt(
    proxy: Proxy, app_name: str, redis_client: redis.Redis
) -> None:
    """The same lost reply with ``idempotent_sends=False``: the send raises though its
    records are in, and sending them again (what a caller would do) stores them twice."""
    app = make_app(app_name, proxy.url, idempotent_sends=False)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=4)
    await pings.send(Ping(key="warm", n=-1))
    records = [Ping(key=f"k{i}", n=i) for i in range(200)]
    proxy.arm(f"__strm:{app_name}.pings.".encode())
    with pytest.raises(Unavailable) as lost:
        await pings.send(*records)
    assert not isinstance(lost.value, NotConnected)
    await pings.send(*records)
    stored = [f for p in pings.partitions for _, f in _entries(redis_client, p.key)]
    assert len(stored) == 2 * len(records) + 1
    await app.aclose()


async def test_a_record_sent_again_by_key_is_stored_once(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """A stream's ``idempotency_key``, or ``keys=`` per send: the application's own retry
    (a new call) of a record sent before appends nothing and gets the first id back."""
    app = make_app(app_name, redis_url)
    orders = app.stream(
        "orders", record=Ping, partition_by="key", partition_count=2, idempotency_key="key"
    )
    first = await orders.send(Ping(key="a", n=1), Ping(key="b", n=2))
    again = await orders.send(Ping(key="b", n=2), Ping(key="c", n=3))
    assert again[0] == first[1] and again.duplicates == 1
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    one = await pings.send(Ping(key="x", n=1), keys=["order-7"])
    assert await pings.send(Ping(key="x", n=1), keys=["order-7"]) == one
    assert sum(redis_client.xlen(p.key) for p in orders.partitions) == 3
    assert sum(redis_client.xlen(p.key) for p in pings.partitions) == 1
    with pytest.raises(IdentityError, match="one key per record"):
        await pings.send(Ping(key="x", n=1), keys=["a", "b"])
    with pytest.raises(IdentityError, match="explicit entry ids"):
        await pings.send(Ping(key="x", n=1), keys=["a"], stream_ids=["9-9"])
    await app.aclose()
