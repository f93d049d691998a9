"""Events sent with Stream.send reach an in-process worker, in partition order, once."""

from __future__ import annotations

import asyncio

import pytest
import redis

from runnel import App, Record
from runnel.runtime.worker import Worker


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


@pytest.mark.parametrize("protocol", [2, 3])
async def test_both_wire_protocols(redis_url: str, app_name: str, protocol: int) -> None:
    """RESP2 and RESP3 replies (``?protocol=3``) through every hot path: a batch send,
    fenced reads per event and in batches, fenced acknowledgements."""
    app = App(name=app_name, redis_url=f"{redis_url}?protocol={protocol}")
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=4)
    seen: dict[str, list[int]] = {}
    batches: list[int] = []
    done = asyncio.Event()
    total = 500

    def finished() -> None:  # both processors have had every event (the worker may stop)
        if sum(map(len, seen.values())) == total and sum(batches) >= total:
            done.set()

    def record(ping: Ping) -> None:
        seen.setdefault(ping.key, []).append(ping.n)
        finished()

    @app.processor(pings, name="single")
    async def single(events):
        async for ping in events.records():
            record(ping)

    @app.processor(pings, name="batched")
    async def batched(events):
        async for batch in events.take(50, within=0.05).records():
            batches.append(len(batch))
            finished()

    ids = await pings.send(*[Ping(key=f"k{i % 7}", n=i) for i in range(total)])
    assert len(ids) == total and all(isinstance(xid, bytes) for xid in ids)
    kwargs = app.store.redis.connection_pool.connection_kwargs  # type: ignore[attr-defined]
    assert int(kwargs.get("protocol") or 2) == protocol
    assert await run_until(Worker(app), done) == 0
    assert sorted(n for ns in seen.values() for n in ns) == list(range(total))
    assert all(ns == sorted(ns) for ns in seen.values())
    assert 0 < sum(batches) <= total
    client = redis.Redis.from_url(redis_url)
    try:
        for p in pings.partitions:
            assert client.xpending(p.key, "single")["pending"] == 0
    finally:
        client.close()
