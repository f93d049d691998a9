"""``python -m benchmarks codecs [EVENTS]``: each codec on the same records.

For every serializer (with and without a compressor): encode+decode speed through a
stream (record -> entry fields -> record, exactly what producers and processors do), the
ratio against JSON measured in the same run, the payload size, and the bytes per event the
partition streams take in a private redis-server (``MEMORY USAGE``), after sending the
same events with each codec.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import enum
import importlib.util
import os
import random
import signal
import tempfile
import time
from pathlib import Path

import redis.asyncio as aioredis
from pydantic import condecimal

from runnel import App, Record
from runnel_redis.embedded import start_server

CODECS = ["json", "msgpack", "avro", "json+gzip", "msgpack+gzip", "avro+gzip"]
CODECS += [
    f"{s}+zstd" for s in ("json", "msgpack", "avro") if importlib.util.find_spec("zstandard")
]
CODECS += [f"{s}+lz4" for s in ("json", "msgpack", "avro") if importlib.util.find_spec("lz4")]


class Status(enum.Enum):
    NEW = "new"
    PAID = "paid"
    SHIPPED = "shipped"


class Line(Record):
    sku: str
    quantity: int
    price: condecimal(max_digits=12, decimal_places=2)  # type: ignore[valid-type]


class Order(Record):
    order_id: int
    customer: str
    status: Status
    created_at: datetime.datetime
    lines: list[Line]
    note: str | None = None


def sample(n: int) -> list[Order]:
    rng = random.Random(7)
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    return [
        Order(
            order_id=i,
            customer=f"customer-{rng.randrange(10_000)}",
            status=rng.choice(list(Status)),
            created_at=start + datetime.timedelta(seconds=rng.randrange(10**7)),
            lines=[
                Line(
                    sku=f"SKU-{rng.randrange(1000):04d}",
                    quantity=rng.randrange(1, 5),
                    price=decimal.Decimal(rng.randrange(100, 100_000)) / 100,
                )
                for _ in range(rng.randrange(1, 4))
            ],
            note=None if rng.random() < 0.8 else "leave at the door",
        )
        for i in range(n)
    ]


def codec_speed(app: App, codec: str, records: list[Order]) -> tuple[float, float]:
    """Events per second for encode+decode, and mean payload bytes."""
    stream = app.stream(f"s-{codec}", record=Order, partition_by="order_id", serializer=codec)
    encoded = [stream.encode(r) for r in records[:200]]
    for fields in encoded:  # warm up, and check the round trip
        assert stream.decode(fields) in records
    size = sum(len(f[b"data"]) for f in encoded) / len(encoded)
    best = 0.0
    for _ in range(3):
        began = time.perf_counter()
        for record in records:
            stream.decode(stream.encode(record))
        best = max(best, len(records) / (time.perf_counter() - began))
    return best, size


async def redis_bytes(url: str, codec: str, records: list[Order]) -> float:
    """Bytes per event the partition streams take after sending ``records``."""
    app = App(name="codecs", redis_url=url)
    stream = app.stream(f"r-{codec}", record=Order, partition_by="order_id", serializer=codec)
    for i in range(0, len(records), 1000):
        await stream.send(*records[i : i + 1000])
    client = aioredis.Redis.from_url(url)
    used = 0
    for partition in stream.partitions:
        used += await client.memory_usage(partition.key, samples=0) or 0
    await client.aclose()
    await app.aclose()
    return used / len(records)


async def main(total: int) -> None:
    records = sample(total)
    server = start_server(Path(tempfile.mkdtemp(prefix="runnel-bench-")), persist=False)
    try:
        app = App(name="codecs", redis_url=server.url)
        results = {}
        for codec in CODECS:
            speed, size = codec_speed(app, codec, records)
            results[codec] = (speed, size, await redis_bytes(server.url, codec, records))
        base = results["json"][0]
        print(f"{total:,} Order records (nested lines, enum, datetime, decimals)\n")
        print(f"{'codec':<14} {'encode+decode':>14} {'vs json':>8} {'payload':>9} {'in Redis':>10}")
        for codec, (speed, size, stored) in results.items():
            print(
                f"{codec:<14} {speed:>12,.0f}/s {speed / base:>8.2f} "
                f"{size:>7.0f} B {stored:>8.0f} B"
            )
    finally:
        os.kill(server.pid, signal.SIGTERM)


def run(args: list[str]) -> None:
    asyncio.run(main(int(args[0]) if args else 20_000))
