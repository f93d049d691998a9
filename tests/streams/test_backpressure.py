"""Memory stays flat on a backlog: a partition's inbox never outgrows two reads."""

from __future__ import annotations

import asyncio

import redis

from runnel import Record
from tests.support.apps import Running, keys_by_partition, make_app, pending_ids


class Ping(Record):
    key: str
    n: int


async def test_inbox_is_bounded_with_a_backlog_and_a_slow_processor(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    prefetch = 10
    backlog = 4000
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    running: Running | None = None
    sizes: list[int] = []
    processed: dict[str, int] = {}

    @app.processor(pings, prefetch_count=prefetch)
    async def slow(events):
        async for event in events:
            assert running is not None
            sizes.extend(len(box.items) for box in running.inboxes("slow").values())
            processed[event.partition.key] = processed.get(event.partition.key, 0) + 1
            await asyncio.sleep(0.002)

    for chunk in range(0, backlog, 1000):
        await pings.send(*[Ping(key=f"k{i % 13}", n=i) for i in range(chunk, chunk + 1000)])
    lengths = {p.key: redis_client.xlen(p.key) for p in pings.partitions}
    assert sum(lengths.values()) == backlog and all(lengths.values())

    running = Running(app)
    async with running:
        await running.until(lambda: len(processed) == 2 and min(processed.values()) >= 60, "work")
        assert await running.stop() == 0

    assert max(sizes) <= 2 * prefetch, max(sizes)
    assert max(sizes) >= prefetch, "the fetcher should have kept the inbox topped up"
    # What was read but not processed is bounded too: the rest was never fetched.
    for p in pings.partitions:
        in_group = len(pending_ids(redis_client, p.key, "slow"))
        assert in_group <= 2 * prefetch, (p.key, in_group)
        assert processed[p.key] + in_group < lengths[p.key], "the backlog was not all fetched"


async def test_a_busy_partition_does_not_hold_a_quiet_one_back(
    redis_url: str, app_name: str
) -> None:
    # Long blocking reads: the quiet partition must still be noticed while the busy one
    # keeps its inbox full (reads that leave it out never block).
    app = make_app(app_name, redis_url, default_read_timeout=2000)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    busy, quiet = keys_by_partition(pings, lambda k: Ping(key=k, n=0), 2)
    seen: list[tuple[str, int]] = []
    backlog = 400

    @app.processor(pings, prefetch_count=4)
    async def proc(events):
        async for ping in events.records():
            if ping.key == busy:
                await asyncio.sleep(0.005)
            seen.append((ping.key, ping.n))

    await pings.send(*[Ping(key=busy, n=i) for i in range(backlog)])
    async with Running(app) as running:
        await running.until(lambda: len(seen) >= 20, "the busy partition is under way")
        await pings.send(Ping(key=quiet, n=-1))
        await running.until(lambda: (quiet, -1) in seen, "the quiet partition's event")
        assert await running.stop() == 0
    busy_done = [n for key, n in seen if key == busy]
    assert len(busy_done) < backlog, "the quiet event waited for the whole backlog"
    assert busy_done == list(range(len(busy_done)))
