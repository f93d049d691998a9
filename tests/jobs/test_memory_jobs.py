"""The in-memory job store on its own: what only it must get right (one state shared by
the stores of several event loops, woken across threads; expiry). The contract it shares
with every other store is checked on each in tests/contract/test_jobs.py."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from runnel.jobs import JobStatus, ManualClock
from runnel.jobs.batching import EnqueueBatches
from runnel.jobs.model import NewJob, Outcome
from runnel.memory.jobs import JobQueueState, MemoryJobStore
from tests.support.units import no_runnel_env  # noqa: F401 (autouse: no RUNNEL_* of the shell)

T0 = 1_700_000_000.0


def new(job_id: str) -> NewJob:
    return NewJob(job_id, "add", b'{"args":[]}', "json", 0, True, T0)


def in_thread(coro_factory: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a coroutine in a fresh event loop in another thread (as the portal does)."""
    errors: list[BaseException] = []

    def main() -> None:
        try:
            asyncio.run(coro_factory())
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=main)
    thread.start()
    thread.join()
    assert not errors, errors


async def test_an_enqueue_from_another_loop_wakes_a_blocked_taker() -> None:
    state = JobQueueState()
    here = MemoryJobStore(state)
    taker = asyncio.create_task(here.take("e1", 1, 60_000, ManualClock(T0)))
    await asyncio.sleep(0)
    assert state.takers  # blocked, not polling

    async def enqueue() -> None:
        assert await EnqueueBatches(MemoryJobStore(state)).submit(new("a"))

    await asyncio.to_thread(in_thread, enqueue)
    [d] = await asyncio.wait_for(taker, 30)
    assert d.id == "a"
    assert not state.takers


async def test_a_result_from_another_loop_wakes_a_waiter() -> None:
    state = JobQueueState()
    here = MemoryJobStore(state)
    await here.enqueue([new("a")])
    [d] = await here.take("e1", 1, 0, ManualClock(T0))
    waiter = asyncio.create_task(here.wait_result("a", 60))
    await asyncio.sleep(0)
    assert state.result_waiters["a"]

    async def finish() -> None:
        done = Outcome("success", d.ticket, d.id, T0, result=b"v1")
        assert await MemoryJobStore(state).finish("e1", [done], 60) == []

    await asyncio.to_thread(in_thread, finish)
    assert await asyncio.wait_for(waiter, 30) == b"v1"


async def test_a_waiter_that_gives_up_returns_none() -> None:
    store = MemoryJobStore(JobQueueState())
    assert await store.take("e1", 1, 1, ManualClock(T0)) == []
    assert await store.wait_result("nope", 0.001) is None


async def test_a_success_expires_with_its_result_and_the_id_is_free_again() -> None:
    store = MemoryJobStore(JobQueueState())
    await store.enqueue([new("a")])
    [d] = await store.take("e1", 1, 0, ManualClock(T0))
    await store.finish("e1", [Outcome("success", d.ticket, d.id, T0, result=b"v1")], 0.001)
    await asyncio.sleep(0.01)
    assert await store.status("a") == JobStatus.UNKNOWN
    assert await store.job("a") is None
    assert await store.wait_result("a", 0.001) is None
    assert await store.enqueue([new("a")]) == [True]


async def test_a_heartbeat_expires() -> None:
    store = MemoryJobStore(JobQueueState())
    await store.beat("e1", {"started": T0}, 0.001)
    await asyncio.sleep(0.01)
    [state] = await store.executors()
    assert (state.alive, state.info) == (False, {"started": T0})
    assert await store.forget("e1")


async def test_stores_over_one_state_share_it() -> None:
    state = JobQueueState()
    one, two = MemoryJobStore(state), MemoryJobStore(state)
    await one.enqueue([new("a")])
    assert await two.status("a") == JobStatus.SENT
    assert (await two.counts(T0)).queued == 1
