"""The app ``runnel worker --processes N`` runs in the processes benchmark (benchmarks/jobs.py):
a no-op job and a no-op processor of a 16-partition stream, and how to fill their backlogs."""

from __future__ import annotations

import orjson
import redis

from runnel import App, Record
from runnel_redis import keys

APP = "bproc"
STREAM = "drain"
PARTITIONS = 16

app = App(name=APP, default_join_delay=0, default_grace_period=1)


class Ping(Record):
    key: str
    n: int


pings = app.stream(STREAM, record=Ping, partition_by="key", partition_count=PARTITIONS)


@app.processor(pings, name="drain")
async def drain(events):  # type: ignore[no-untyped-def]
    async for _ in events:
        pass


@app.job
async def noop() -> None:
    pass


def fill_stream(url: str, total: int, chunk: int = 20_000) -> None:
    client = redis.Redis.from_url(url)
    streams = [keys.partition(APP, STREAM, n) for n in range(PARTITIONS)]
    for start in range(0, total, chunk):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(start + chunk, total)):
            data = orjson.dumps({"key": f"k{i}", "n": i})
            pipe.execute_command("XADD", streams[i % PARTITIONS], "*", "data", data)
        pipe.execute()
    client.close()


def fill_jobs(url: str, total: int) -> None:
    """Enqueue ``total`` no-op jobs through Runnel itself (many at once)."""
    import asyncio

    async def go() -> None:
        filler = App(name=APP, redis_url=url)
        job = filler.job(name="noop")(noop.func)
        batch = 500
        for start in range(0, total, batch):
            await asyncio.gather(*(job.delay() for _ in range(min(batch, total - start))))
        await filler.aclose()

    asyncio.run(go())
