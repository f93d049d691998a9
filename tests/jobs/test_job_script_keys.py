"""The job scripts that are given every key they touch, watched doing it on a real server
(tests/support/script_keys.py): ElastiCache Serverless refuses a script any other key.
Both key layouts, on the session's redis-server. The other job scripts still name keys
from what they read (docs/managed.md); ``--check-script-keys`` lists them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from runnel.jobs import JobStatus, ManualClock
from runnel.jobs.codec import error_item
from runnel.jobs.model import ErrorInfo, NewJob, Outcome
from runnel.settings import Settings
from runnel.store import JobStore, backend_for
from tests.support import servers
from tests.support.script_keys import Watch

T0 = 1_700_000_000.0
BOOM = ErrorInfo("ValueError", "boom", "Traceback...")


@pytest.fixture(params=["classic", "cluster"])
async def store(
    request: pytest.FixtureRequest, redis_url: str, app_name: str
) -> AsyncIterator[JobStore]:
    backend = backend_for(redis_url, Settings(redis_key_layout=request.param))
    yield backend.job_store(app_name)
    await backend.aclose()


async def dead(store: JobStore, queue: str, *ids: str) -> None:
    """Jobs ``ids`` of ``queue`` gone dead on their first try."""
    await store.enqueue(
        [NewJob(i, "add", b"{}", "json", 0, True, T0, None, queue=queue) for i in ids]
    )
    taken = await store.take("e1", len(ids), 0, ManualClock(T0), [(queue, len(ids))])
    outcomes = [
        Outcome("dead", d.ticket, d.id, T0, result=error_item(BOOM), error=BOOM) for d in taken
    ]
    assert await store.finish("e1", outcomes, 60.0) == []


@pytest.mark.parametrize("queue", ["default", "emails"])
async def test_replay_and_purge_touch_only_the_keys_they_are_given(
    store: JobStore, redis_url: str, queue: str
) -> None:
    if servers.restricted():
        pytest.skip("watched through MONITOR, which --redis-restricted renames away")
    await store.prepare(["default", "emails"])
    await dead(store, queue, "a", "b", "c")
    letters = await store.dead_letters()
    watch = Watch(redis_url)
    watch.start()
    try:
        assert await store.replay(letters[:2], T0 + 1) == 2
        assert await store.purge(letters) == 1
    finally:
        watch.stop()
    assert watch.undeclared() == []
    assert [await store.status(i) for i in "abc"] == [JobStatus.SENT] * 2 + [JobStatus.UNKNOWN]
