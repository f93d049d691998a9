"""The same work done by a hand-written redis-py loop, as it runs inside its own process.

This is the loop Runnel is measured against: XREADGROUP over the 16 partitions, one JSON
decode (orjson) per event, one pipelined XACK per read; pipelined XADD in MULTI/EXEC for
sends. No locks, no rebalancing, no delivery guarantees beyond the consumer group's.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from benchmarks.common import PARTITIONS, stream_keys
from benchmarks.tally import Tally, now, paced, percentiles, timed_batches

MAXLEN = 50_000  # Runnel's default partition_size, which its sends trim to


def _until_sigterm() -> asyncio.Event:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    return stop


async def _groups(client: aioredis.Redis, partitions: list[str], group: str, start: str) -> None:
    for key in partitions:
        try:
            await client.xgroup_create(key, group, id=start, mkstream=True)
        except ResponseError as exc:  # another process of the same benchmark made it
            if "BUSYGROUP" not in str(exc):
                raise


async def _consume(
    client: aioredis.Redis,
    partitions: list[str],
    group: str,
    count: int,
    block_ms: int,
    each: Callable[[dict[str, Any]], None],
    batch: Callable[[int], None],
    stop: asyncio.Event,
) -> None:
    """Read, decode each event, acknowledge each read in one round trip; until ``stop``."""
    consumer = f"c{os.getpid()}"  # processes sharing a group split its entries
    streams = {key: ">" for key in partitions}
    while not stop.is_set():
        reply = await client.xreadgroup(group, consumer, streams, count=count, block=block_ms)
        if not reply:
            continue
        n = 0
        async with client.pipeline(transaction=False) as pipe:
            for key, entries in reply:
                for _, fields in entries:
                    each(orjson.loads(fields[b"data"]))
                n += len(entries)
                pipe.xack(key, group, *[xid for xid, _ in entries])
            batch(n)
            await pipe.execute()


def xadd(pipe: Any, key: str, data: bytes) -> None:
    """Appended as Runnel appends: trimmed to about MAXLEN entries."""
    pipe.xadd(key, {"data": data}, maxlen=MAXLEN, approximate=True)


async def drain(
    url: str, stream: str, group: str, count: int, ready: Callable[[], None] | None = None
) -> dict[str, Any]:
    """Read ``count`` per partition per round trip, until SIGTERM. With ``ready``: call it
    once the group exists, then read nothing before SIGUSR1 (the harness's release)."""
    stop = _until_sigterm()
    client = aioredis.Redis.from_url(url)
    partitions = stream_keys(stream)
    await _groups(client, partitions, group, "0")
    tally = Tally()
    if ready is not None:
        released = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, released.set)
        ready()
        await released.wait()
    await _consume(client, partitions, group, count, 100, lambda _: None, tally.add, stop)
    await client.aclose()
    return tally.result()


async def count(
    url: str, stream: str, group: str, count: int, window: float | None = None
) -> dict[str, Any]:
    """Count per key by hand, at least once: per read of ``count`` per partition, one
    pipeline with an HINCRBY per event and the XACK of the read; until SIGTERM. With
    ``window`` (seconds): per tumbling window of the entry id's time, each window of a
    partition a hash of its own (key -> count), given an hour to live (as Runnel's
    ``expires=3600``) once per read that touched it."""
    stop = _until_sigterm()
    client = aioredis.Redis.from_url(url)
    partitions = stream_keys(stream)
    await _groups(client, partitions, group, "0")
    tally = Tally()
    consumer = f"c{os.getpid()}"
    streams = {key: ">" for key in partitions}
    width = int(window * 1000) if window else 0
    while not stop.is_set():
        reply = await client.xreadgroup(group, consumer, streams, count=count, block=100)
        if not reply:
            continue
        n = 0
        async with client.pipeline(transaction=False) as pipe:
            for key, entries in reply:
                table = f"counts-{group}:{key.decode() if isinstance(key, bytes) else key}"
                if width:
                    touched = set()
                    for xid, fields in entries:
                        start = int(xid.partition(b"-")[0]) // width * width
                        pipe.hincrby(f"{table}:{start}", orjson.loads(fields[b"data"])["key"], 1)
                        touched.add(start)
                    for start in touched:
                        pipe.pexpireat(f"{table}:{start}", start + width + 3_600_000)
                else:
                    for _, fields in entries:
                        pipe.hincrby(table, orjson.loads(fields[b"data"])["key"], 1)
                n += len(entries)
                pipe.xack(key, group, *[xid for xid, _ in entries])
            tally.add(n)
            await pipe.execute()
    await client.aclose()
    return tally.result()


async def send(url: str, stream: str, total: int, batch: int) -> dict[str, Any]:
    """Batches of XADD in MULTI/EXEC; the dicts are made before timing, encoded in it."""
    client = aioredis.Redis.from_url(url)
    partitions = stream_keys(stream)
    records = [{"key": f"k{i}", "n": i} for i in range(batch)]

    async def one_batch() -> None:
        async with client.pipeline(transaction=True) as pipe:
            for i, record in enumerate(records):
                data = orjson.dumps(record)
                xadd(pipe, partitions[i % PARTITIONS], data)
            await pipe.execute()

    result = await timed_batches(one_batch, total, batch)
    await client.aclose()
    return result


async def latency(
    url: str, stream: str, group: str, warmup: int, ready: Callable[[], None]
) -> dict[str, Any]:
    """XREADGROUP BLOCK over the partitions, send -> decode latency per event."""
    stop = _until_sigterm()
    client = aioredis.Redis.from_url(url)
    partitions = stream_keys(stream)
    await _groups(client, partitions, group, "$")
    ready()
    latencies: list[float] = []

    def measure(record: dict[str, Any]) -> None:
        if record["n"] >= warmup:
            latencies.append(time.time() - record["sent"])

    await _consume(client, partitions, group, 100, 500, measure, lambda _: None, stop)
    await client.aclose()
    return percentiles(latencies)


async def produce(
    url: str, stream: str, rate: int, per_tick: int, seconds: float
) -> dict[str, Any]:
    """``per_tick`` stamped records per pipelined XADD on a fixed schedule."""
    client = aioredis.Redis.from_url(url)
    partitions = stream_keys(stream)
    await client.ping()  # connect first
    start, n = now(), 0
    async for _ in paced(rate, per_tick, seconds):
        sent = time.time()
        async with client.pipeline(transaction=True) as pipe:
            for i in range(n, n + per_tick):
                data = orjson.dumps({"key": f"k{i}", "n": i, "sent": sent})
                xadd(pipe, partitions[i % PARTITIONS], data)
            await pipe.execute()
        n += per_tick
    elapsed = now() - start
    await client.aclose()
    return {"events": n, "seconds": elapsed}
