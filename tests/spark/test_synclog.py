"""The synchronous log runnel-spark reads and writes through, against a real redis-server."""

from __future__ import annotations

import pickle

import pytest
import redis

from runnel.store.log import PartitionId
from runnel.store.resolve import backend_for
from runnel.store.synclog import LogError, next_id
from runnel_redis.synclog import RedisLog


def test_append_read_extents_and_bounds(redis_url: str, redis_client: redis.Redis) -> None:
    log = RedisLog(redis_url)
    a, b, c = (PartitionId("app", "s", n) for n in range(3))
    log.append([(a, {b"data": b"0"}), (b, {b"data": b"x"}), (a, {b"data": b"1"})], maxlen=1000)
    log.append([(a, {b"data": str(n).encode()}) for n in range(2, 10)])
    ids = [x.decode() for x, _ in redis_client.xrange("__strm:app.s.0")]

    [ea, eb, empty] = log.extents([a, b, c])
    assert (ea.length, ea.first, ea.last) == (10, ids[0], ids[-1])
    assert eb.length == 1 and empty.length == 0 and empty.first is None and empty.last is None

    pages = list(log.read(a, ids[1], ids[8], 3))
    assert [len(p) for p in pages] == [3, 3, 2]
    assert [f[b"data"] for page in pages for _, f in page] == [str(n).encode() for n in range(1, 9)]
    assert list(log.read(a, next_id(ids[-1]), "+", 3)) == []

    assert log.nth_ids([(a, ids[2], ids[-1], 4), (a, ids[8], ids[-1], 4), (b, "0-0", "+", 1)]) == [
        ids[5],
        ids[9],
        redis_client.xrange("__strm:app.s.1")[0][0].decode(),
    ]
    assert log.nth_ids([(c, "0-0", "+", 5)]) == [None]

    # Pickled for Spark's executors: only the URL travels; the copy connects again.
    copy = pickle.loads(pickle.dumps(log))
    assert copy.url == redis_url and copy.extents([a]) == [ea]
    log.close()
    copy.close()


def test_an_append_is_all_or_none(redis_url: str, redis_client: redis.Redis) -> None:
    log = RedisLog(redis_url)
    redis_client.set("__strm:app.t.1", "not a stream")
    with pytest.raises(LogError, match="WRONGTYPE"):
        log.append(
            [
                (PartitionId("app", "t", 0), {b"data": b"a"}),
                (PartitionId("app", "t", 1), {b"data": b"b"}),
            ]
        )
    assert redis_client.exists("__strm:app.t.0") == 0
    log.close()


def test_the_transport_provides_the_log(redis_url: str) -> None:
    from runnel.settings import Settings

    transport = backend_for(redis_url, Settings())
    assert isinstance(transport.sync_log(), RedisLog)
    assert transport.sync_log().url == redis_url


def test_next_id() -> None:
    assert next_id("5-0") == "5-1"
    assert next_id(f"5-{2**64 - 1}") == "6-0"
