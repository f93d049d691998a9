"""Job hashes written by hand on Redis, for the tests of the scripts that read them (what
an enqueue script stored, as this version or an older client did), and the Redis job
store those tests drive (``redis_job_store``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis

from runnel.settings import Settings
from runnel.store import JobStore, backend_for
from runnel_redis.layout import layout_for

T0 = 1_700_000_000.0
"""When every hand-written job was created."""


@pytest.fixture
async def redis_job_store(redis_url: str, app_name: str) -> AsyncIterator[JobStore]:
    """The job store of ``app_name`` on the session's emptied redis-server."""
    backend = backend_for(redis_url, Settings())
    yield backend.job_store(app_name)
    await backend.aclose()


def write_job(
    client: redis.Redis,
    redis_url: str,
    app: str,
    job_id: str,
    *,
    retries: int = 0,
    names_entry: bool = True,
) -> None:
    """A queued job ``add(1)``: its hash and its queue entry. Without ``names_entry``, as
    an older client's enqueue script stored it: the hash does not name the entry."""
    layout = layout_for(redis_url)
    client.hset(
        layout.job(app, job_id),
        mapping={
            "name": "add",
            "status": "SENT",
            "payload": b'{"args":[1]}',
            "codec": "json",
            "retries": retries,
            "results": 1,
            "tries": 0,
            "created": int(T0 * 1000),
        },
    )
    entry = client.xadd(layout.job_queue(app), {"id": job_id})
    if names_entry:
        client.hset(layout.job(app, job_id), "entry", entry)
