"""Take-over: how soon a partition's new owner processes an event when the partition's
table holds 100,000 keys, beside what replaying those keys would take.

One worker process counts a backlog of 100,000 events with distinct keys, all routed to
partition 0, into a table, and stops (a graceful stop gives the lock up). A few more
events are appended, and a second worker process starts: the time from partition 0 being
assigned to it (its lock just taken) to its first event processed is the take-over. It
reads the counts it needs from Redis; nothing is replayed. Beside it, the time it takes
to read the table's 100,000 keys and values (HSCAN, decoded): what a store kept outside
Redis would have to do before the first event, restoring from a changelog.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import orjson
import redis

from benchmarks import harness
from benchmarks.common import APP, PARTITIONS, Row, drop, stream_keys
from runnel.hashing import default_hasher
from runnel_redis import keys as redis_keys

STREAM = "handover"
TARGET_MS = 100.0


def keys_of_partition_0(count: int) -> list[str]:
    out: list[str] = []
    i = 0
    while len(out) < count:
        key = f"k{i}"
        if default_hasher(key) % PARTITIONS == 0:
            out.append(key)
        i += 1
    return out


def append(client: redis.Redis, keys: list[str], chunk: int = 20_000) -> None:
    partition = stream_keys(STREAM)[0]
    for start in range(0, len(keys), chunk):
        pipe = client.pipeline(transaction=False)
        for i, key in enumerate(keys[start : start + chunk], start):
            pipe.execute_command("XADD", partition, "*", "data", orjson.dumps({"key": key, "n": i}))
        pipe.execute()


def replay(client: redis.Redis, table: str) -> tuple[float, int]:
    """Read (and decode) every key and value of the table's partition 0."""
    began = time.perf_counter()
    read = 0
    for key, value in client.hscan_iter(redis_keys.table(APP, table, 0), count=1000):
        orjson.loads(key), orjson.loads(value)
        read += 1
    return (time.perf_counter() - began) * 1000, read


def run(url: str, keys: int = 100_000, rounds: int = 3, **_: Any) -> list[Row]:
    print(f"take-over: a partition whose table holds {keys:,} keys, {rounds} rounds", flush=True)
    client = redis.Redis.from_url(url)
    names = keys_of_partition_0(keys)
    takeovers: list[float] = []
    replays: list[float] = []
    try:
        for n in range(rounds):
            drop(url, STREAM)
            group = f"handover{n}"
            append(client, names)
            harness.drain(url, STREAM, "runnel", group, 1, keys, action="count")
            append(client, names[:10])  # waiting for the next owner
            args = ["--url", url, "--stream", STREAM, "--group", f"runnel-{group}"]
            got = harness.Proc("runnel", "takeover", *args).line()
            if got["count_read"] != 1:
                raise RuntimeError(f"the next owner read {got['count_read']} (1 was committed)")
            took = (got["first"] - got["assigned"]) * 1000
            spent, read = replay(client, f"counts-runnel-{group}")
            if read != keys:
                raise RuntimeError(f"the table holds {read:,} keys, not {keys:,}")
            takeovers.append(took)
            replays.append(spent)
            print(f"  round {n + 1}: take-over {took:.1f} ms, replay {spent:.0f} ms", flush=True)
    finally:
        drop(url, STREAM)
        client.close()
    median = statistics.median(takeovers)
    replayed = statistics.median(replays)
    return [
        Row(
            f"take-over, {keys // 1000}k-key table (median; vs reading it all)",
            f"{median:.1f} ms",
            f"{replayed:.0f} ms",
            f"{median / replayed:.3f}",
            f"< {TARGET_MS:.0f} ms",
            median < TARGET_MS,
            f"{min(takeovers):.1f}-{max(takeovers):.1f} ms",
        )
    ]
