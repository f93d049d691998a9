"""``python -m benchmarks [EVENTS]``: throughput of Runnel next to a hand-written redis-py loop.

Both sides run against one private redis-server started here, on the same data, one after
the other; each figure is printed with the plain loop's figure and their ratio.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import orjson
import redis.asyncio as aioredis

from runnel import App, Record
from runnel.processing.worker import Worker
from runnel_redis.embedded import start_server

PARTITIONS = 16


class Ping(Record):
    key: str
    n: int


def app_for(url: str, name: str) -> tuple[App, object]:
    # No join delay: the figure is the processing rate, not the start-up.
    app = App(name=name, redis_url=url, default_join_delay=0)
    return app, app.stream("pings", record=Ping, partition_by="key", partition_count=PARTITIONS)


async def runnel_send(url: str, total: int) -> float:
    app, pings = app_for(url, "bench")
    batch = [Ping(key=f"k{i}", n=i) for i in range(1000)]
    start = time.perf_counter()
    for _ in range(total // 1000):
        await pings.send(*batch)  # type: ignore[attr-defined]
    rate = total / (time.perf_counter() - start)
    await app.aclose()
    return rate


async def plain_send(url: str, total: int) -> float:
    client = aioredis.Redis.from_url(url)
    keys = [f"__strm:plain.pings.{i}" for i in range(PARTITIONS)]
    payloads = [orjson.dumps({"key": f"k{i}", "n": i}) for i in range(1000)]
    start = time.perf_counter()
    for _ in range(total // 1000):
        async with client.pipeline(transaction=True) as pipe:
            for i, data in enumerate(payloads):
                pipe.xadd(keys[i % PARTITIONS], {"data": data}, maxlen=50_000, approximate=True)
            await pipe.execute()
    rate = total / (time.perf_counter() - start)
    await client.aclose()
    return rate


async def runnel_drain(url: str, total: int, batched: bool) -> float:
    app, pings = app_for(url, "bench")
    done = asyncio.Event()
    seen = 0

    @app.processor(pings, name="batched" if batched else "single")  # type: ignore[arg-type]
    async def drain(events):
        nonlocal seen
        if batched:
            async for batch in events.take(100, within=0.01).records():
                seen += len(batch)
                if seen >= total:
                    done.set()
        else:
            async for _ in events.records():
                seen += 1
                if seen >= total:
                    done.set()

    worker = Worker(app)
    start = time.perf_counter()
    task = asyncio.create_task(worker.run())
    await done.wait()
    rate = total / (time.perf_counter() - start)
    worker.stop()
    await task
    return rate


async def plain_drain(url: str, total: int, count: int, group: str) -> float:
    client = aioredis.Redis.from_url(url)
    keys = [f"__strm:plain.pings.{i}" for i in range(PARTITIONS)]
    for key in keys:
        await client.xgroup_create(key, group, id="0")
    seen = 0
    start = time.perf_counter()
    while seen < total:
        reply = await client.xreadgroup(group, "c", {k: ">" for k in keys}, count=count, block=1000)
        async with client.pipeline(transaction=False) as pipe:
            for key, entries in reply:
                for _, fields in entries:
                    orjson.loads(fields[b"data"])
                seen += len(entries)
                pipe.xack(key, group, *[xid for xid, _ in entries])
            await pipe.execute()
    rate = total / (time.perf_counter() - start)
    await client.aclose()
    return rate


def row(name: str, ours: float, plain: float) -> None:
    print(
        f"{name:<24} runnel {ours:>9,.0f}/s   plain redis-py {plain:>9,.0f}/s"
        f"   ratio {ours / plain:.2f}"
    )


async def main(total: int) -> None:
    server = start_server(Path(tempfile.mkdtemp(prefix="runnel-bench-")), persist=False)
    try:
        url = server.url
        print(f"{total:,} events over {PARTITIONS} partitions, redis-server at {url}\n")
        send_r, send_p = await runnel_send(url, total), await plain_send(url, total)
        row("send (batches of 1000)", send_r, send_p)
        row(
            "process, per event",
            await runnel_drain(url, total, False),
            await plain_drain(url, total, 8, "g8"),
        )
        row(
            "process, take(100)",
            await runnel_drain(url, total, True),
            await plain_drain(url, total, 100, "g100"),
        )
    finally:
        os.kill(server.pid, signal.SIGTERM)


if __name__ == "__main__":
    if sys.argv[1:2] == ["codecs"]:
        from benchmarks import codecs

        codecs.run(sys.argv[2:])
    else:
        asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000))
