"""A store that lost its data under a running worker (a restart without persistence, a
failover to an empty replica): the worker's consumer group is gone, and the next send
makes the partition again without it. The worker makes the group again and processes
what comes; before, every read failed with NOGROUP and the partition stood still."""

from __future__ import annotations

from typing import Any

import redis

from runnel import App, Record
from runnel.testing import run
from tests.support.apps import eventually


class Ping(Record):
    key: str
    n: int


def _forget_everything(client: redis.Redis, app_name: str) -> int:
    """Delete every key of the app, as a Redis that came back empty has none."""
    keys = list(client.scan_iter(match=f"*{app_name}*", count=1000))
    if keys:
        client.delete(*keys)
    return len(keys)


async def test_a_worker_reads_on_after_the_store_lost_its_groups(
    app_name: str, redis_url: str, redis_client: redis.Redis
) -> None:
    app = App(name=app_name, redis_url=redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=3)
    seen: list[int] = []

    @app.processor(pings)
    async def note(events: Any) -> None:
        async for ping in events.records():
            seen.append(ping.n)

    async with run(app, store=redis_url) as t:
        await pings.send(*[Ping(key=f"k{n % 5}", n=n) for n in range(20)])
        await t.processed()
        assert sorted(seen) == list(range(20))
        assert _forget_everything(redis_client, app_name) > 0
        await pings.send(*[Ping(key=f"k{n % 5}", n=n) for n in range(20, 40)])
        await eventually(lambda: sorted(seen) == list(range(40)), "the later events processed")
        await t.processed()
        assert not t.failures
    await app.aclose()
