"""The executor as a whole, on the in-process ``memory://`` store: its life from setup to
leaving, and what it does when a store call fails (an outage is waited out, a bug stops
the worker)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from runnel import App
from runnel.exceptions import Unavailable
from runnel.memory import server as servers
from runnel.runtime.worker import Worker
from runnel.stream import Stream
from tests.support.processing import Ping, until


@pytest.fixture
def memory_app() -> Iterator[App]:
    name = f"t{uuid.uuid4().hex[:8]}"
    yield App(
        name="shop",
        redis_url=f"memory://{name}",
        default_join_delay=0,
        default_lock_expiry=1.5,
        default_read_timeout=50,
    )
    servers.forget(name)


@pytest.fixture
def pings(memory_app: App) -> Stream:
    return memory_app.stream("pings", record=Ping, partition_by="key", partition_count=4)


def counting(app: App, stream: Stream) -> list[int]:
    seen: list[int] = []

    @app.processor(stream, name="proc")
    async def proc(events: Any) -> None:
        async for record in events.records():
            seen.append(record.n)

    return seen


async def test_an_executor_joins_processes_and_leaves(memory_app: App, pings: Stream) -> None:
    seen = counting(memory_app, pings)
    worker = Worker(memory_app)
    running = asyncio.create_task(worker.run())
    executor = worker.executors[0]
    await until(lambda: executor.runner.owned == {0, 1, 2, 3})
    await pings.send(*[Ping(key=f"k{i}", n=i) for i in range(30)])
    await until(lambda: len(seen) == 30)
    coordination = executor.coordination
    worker.stop()
    assert await running == 0
    assert sorted(seen) == list(range(30))
    assert await coordination.members() == {}, "left the membership"
    owners = await coordination.lock_owners([p.id for p in pings.partitions])
    assert set(owners.values()) == {None}, "released every lock"
    backlog = await memory_app.store.admin().backlog([p.id for p in pings.partitions], "proc")
    assert all(pending == 0 for _, pending in backlog.values()), "all acknowledged"


async def test_an_outage_of_the_heartbeat_is_waited_out(memory_app: App, pings: Stream) -> None:
    seen = counting(memory_app, pings)
    worker = Worker(memory_app)
    running = asyncio.create_task(worker.run())
    executor = worker.executors[0]
    await until(lambda: executor.runner.owned == {0, 1, 2, 3})
    beat = executor.coordination.beat
    failures: list[int] = []

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        if len(failures) < 2:
            failures.append(1)
            raise Unavailable("the store went away for a moment")
        return await beat(*args, **kwargs)

    executor.coordination.beat = flaky  # type: ignore[method-assign]
    await until(lambda: len(failures) == 2)
    await pings.send(Ping(key="k", n=1))
    await until(lambda: seen == [1])
    worker.stop()
    assert await running == 0


async def test_a_bug_in_a_store_call_stops_the_worker(memory_app: App, pings: Stream) -> None:
    counting(memory_app, pings)
    worker = Worker(memory_app)
    running = asyncio.create_task(worker.run())
    executor = worker.executors[0]
    await until(lambda: executor.runner.owned)
    calls: list[int] = []

    async def buggy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        raise TypeError("a bug in the store")

    executor.coordination.beat = buggy  # type: ignore[method-assign]
    with pytest.raises(TypeError, match="a bug in the store"):
        await running
    assert calls == [1], "not retried"
