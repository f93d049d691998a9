"""Stopping a task that drops a cancellation, as redis-py does on Python 3.11."""

from __future__ import annotations

import asyncio

import pytest

from runnel.runtime.retry import cancel_and_wait, reraise_if_cancelled
from runnel_redis.seam import guarded


async def test_a_task_that_drops_a_cancellation_is_cancelled_again() -> None:
    """The first cancellation is caught and ignored (what ``asyncio.wait_for`` does to one
    that arrives as a command is sent); the task carries on, and is still stopped."""
    rounds: list[str] = []

    async def polling() -> None:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if rounds:
                    raise
                rounds.append("dropped")

    task = asyncio.create_task(polling())
    await asyncio.sleep(0)
    await cancel_and_wait([task])
    assert task.cancelled()
    assert rounds == ["dropped"]


async def test_tasks_that_ended_or_end_at_once_are_left_as_they_are() -> None:
    async def value() -> int:
        return 7

    done = asyncio.create_task(value())
    await done
    quick = asyncio.create_task(asyncio.sleep(3600))
    await asyncio.sleep(0)
    await cancel_and_wait([done, quick])
    assert done.result() == 7
    assert quick.cancelled()


async def test_a_loop_that_checks_stops_after_a_dropped_cancellation() -> None:
    """A dropped cancellation leaves ``cancelling()`` raised: a loop that checks it at the
    top stops on its own, without a second cancellation."""
    turns: list[int] = []

    async def loop() -> None:
        while True:
            reraise_if_cancelled()
            turns.append(len(turns))
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass  # dropped, as a library might

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert turns == [0]


async def test_the_redis_seam_raises_a_cancellation_the_library_dropped() -> None:
    """What ``asyncio.wait_for`` does on Python 3.11 when a cancellation arrives as the
    reply does: the call returns its value as if never cancelled. The seam notices the
    task was cancelled during the call and raises, so one cancellation is enough."""
    started = asyncio.Event()

    @guarded
    class Dropping:
        async def exists(self) -> int:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass  # dropped
            return 1

    polls: list[int] = []

    async def polling() -> None:
        store = Dropping()
        while True:
            polls.append(await store.exists())

    task = asyncio.create_task(polling())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert polls == []


async def test_the_seam_leaves_a_cancellation_handled_before_the_call_alone() -> None:
    """Clean-up after a cancellation that was caught (a ``finally`` block) may still call
    the store: only a cancellation arriving during the call counts."""
    done: list[str] = []

    @guarded
    class Store:
        async def release(self) -> str:
            await asyncio.sleep(0)
            return "released"

    async def work() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            done.append(await Store().release())

    task = asyncio.create_task(work())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert done == ["released"]
