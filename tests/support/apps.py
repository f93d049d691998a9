"""Running a real :class:`Worker` in the test's own event loop: ``make_app``, ``Running``,
``eventually`` and what the tests read back from Redis.

Used by the in-process stream and job tests and by their re-runs on a Redis Cluster.
``store_url`` is a fixture for the tests that run on both stores (``runnel.testing.run``):
the conftests of tests/streams and tests/jobs register it.
Timeouts here only bound a hung test; no test asserts on how long anything took.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import redis

from runnel import App, Record, Stream
from runnel.processor import Processor
from runnel.runtime.worker import Worker

HANG_GUARD = 20.0
"""Upper bound for any single wait; reaching it means the test hung."""

FAST = {"default_read_timeout": 100, "default_grace_period": 5, "default_join_delay": 0}
"""Short blocking reads so that a graceful stop never waits long for the fetcher."""


@pytest.fixture(params=["memory", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    """Every test that takes it runs on both stores: the in-memory one (``memory://``) and a
    real redis-server (the session's private server, emptied per test), so the two cannot
    drift apart. What ``runnel.testing.run(app, store=...)`` takes: ``"memory"`` or the
    Redis URL."""
    if request.param == "memory":
        return "memory"
    return str(request.getfixturevalue("redis_url"))


def dump_tasks() -> None:
    """Print where every task of the loop is waiting: what a hung test needs to be fixed."""
    print("--- tasks of the hung loop ---")
    for task in asyncio.all_tasks():
        print(f"{task.get_name()}:")
        step: Any = task.get_coro()
        while step is not None:
            frame = getattr(step, "cr_frame", None) or getattr(step, "gi_frame", None)
            if frame is not None:
                print(f"  {frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
            step = getattr(step, "cr_await", None) or getattr(step, "gi_yieldfrom", None)


def make_app(name: str, redis_url: str, **settings: Any) -> App:
    return App(name=name, redis_url=redis_url, **{**FAST, **settings})


class Running:
    """``async with Running(app) as running:`` a worker in a task of the test's loop."""

    def __init__(self, app: App, processors: Sequence[Processor] | None = None) -> None:
        self.app = app
        self.worker = Worker(app, processors)
        self.task: asyncio.Task[int] | None = None

    async def __aenter__(self) -> Running:
        self.task = asyncio.create_task(self.worker.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        if not self.task.done():
            self.worker.stop()
        try:
            async with asyncio.timeout(HANG_GUARD):
                await asyncio.shield(self.task)
        except TimeoutError:
            dump_tasks()
            self.task.cancel()
            raise

    @property
    def done(self) -> bool:
        return self.task is not None and self.task.done()

    async def stop(self) -> int:
        """Graceful stop; the worker's exit code."""
        assert self.task is not None
        self.worker.stop()
        return await self.exit_code()

    async def exit_code(self) -> int:
        """Wait for the worker to end on its own (HALT), returning its exit code."""
        assert self.task is not None
        try:
            async with asyncio.timeout(HANG_GUARD):
                return await asyncio.shield(self.task)
        except TimeoutError:
            dump_tasks()
            raise

    async def until(self, check: Callable[[], Any], what: str = "condition") -> Any:
        """Poll ``check`` until truthy; fail if the worker ends first or the guard expires."""
        return await eventually(check, what, worker=self)

    def consumers(self) -> list[Any]:
        """The partition consumers of every processor (none until set up)."""
        return [c for e in self.worker.executors for c, _ in e.runner.consumers.values()]

    def inboxes(self, processor: str | None = None) -> dict[str, Any]:
        """The inboxes of the (named, or only) processor's runner, by partition key."""
        for executor in self.worker.executors:
            if processor is None or executor.processor.name == processor:
                assert executor.runner is not None
                return executor.runner.inboxes
        raise KeyError(processor)


async def eventually(
    check: Callable[[], Any], what: str = "condition", worker: Running | None = None
) -> Any:
    async with asyncio.timeout(HANG_GUARD):
        while True:
            value = check()
            if value:
                return value
            if worker is not None and worker.done:
                raise AssertionError(
                    f"worker ended (exit code {worker.task.result()!r}) before {what}"  # type: ignore[union-attr]
                )
            await asyncio.sleep(0.01)


def keys_by_partition(stream: Stream, record: Callable[[str], Record], count: int) -> list[str]:
    """``count`` partition keys that the stream routes to ``count`` distinct partitions."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < count:
        key = f"key{i}"
        found.setdefault(stream.partition_number(record(key)), key)
        i += 1
    return list(found.values())


def pending_ids(client: redis.Redis, key: str, group: str) -> list[bytes]:
    """Ids delivered to ``group`` on ``key`` but not acknowledged, in order."""
    rows = client.xpending_range(key, group, min="-", max="+", count=100_000)
    return [row["message_id"] for row in rows]


def pending_or_none(client: redis.Redis, key: str, group: str) -> list[bytes]:
    """Like :func:`pending_ids`, but an empty list while the group does not exist yet."""
    try:
        return pending_ids(client, key, group)
    except redis.ResponseError as exc:
        if "NOGROUP" in str(exc):
            return []
        raise


def all_pending(client: redis.Redis, stream: Stream, group: str) -> dict[str, list[bytes]]:
    return {p.key: pending_ids(client, p.key, group) for p in stream.partitions}
