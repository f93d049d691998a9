"""Events sent with Stream.send reach an in-process worker, in partition order, once."""

from __future__ import annotations

import asyncio

from runnel import App, Record
from runnel.processing.worker import Worker


class Ping(Record):
    key: str
    n: int


async def run_until(worker: Worker, done: asyncio.Event, limit: float = 30) -> int:
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(limit):
            await done.wait()
    finally:
        worker.stop()
    return await task


async def test_events_flow_in_order(redis_url: str, app_name: str) -> None:
    app = App(name=app_name, redis_url=redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=4)
    seen: dict[str, list[int]] = {}
    done = asyncio.Event()
    total = 200

    @app.processor(pings)
    async def collect(events):
        async for ping in events.records():
            seen.setdefault(ping.key, []).append(ping.n)
            if sum(map(len, seen.values())) == total:
                done.set()

    await pings.send(*[Ping(key=f"k{i % 7}", n=i) for i in range(total)])
    assert await run_until(Worker(app), done) == 0
    for key, ns in seen.items():
        assert ns == sorted(ns), key
    assert sorted(n for ns in seen.values() for n in ns) == list(range(total))
