"""The app ``runnel worker --processes N`` runs in the processes benchmark (benchmarks/jobs.py):
a no-op job and a no-op processor of a stream of the benchmarks' usual records and
partitions (benchmarks/common.py), and how to fill their backlogs."""

from __future__ import annotations

from benchmarks.common import APP, PARTITIONS, Ping, fill
from runnel import App

STREAM = "drain"

app = App(name=APP, default_join_delay=0, default_grace_period=1)


pings = app.stream(STREAM, record=Ping, partition_by="key", partition_count=PARTITIONS)


@app.processor(pings, name="drain")
async def drain(events):  # type: ignore[no-untyped-def]
    async for _ in events:
        pass


@app.job
async def noop() -> None:
    pass


def fill_stream(url: str, total: int) -> None:
    fill(url, STREAM, total)


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
