"""Enqueues whose reply was lost, on a real redis-server behind a proxy that drops the
reply: ``delay()``, ``delay_sync()`` (with and without a ``job_id``), concurrent
``delay()`` calls sharing a store call, and workflows are sent again under their call's
identity and store each job once, answered as the first time. Without identities
(``idempotent_sends=False``) the lost reply is the caller's doubt, and its own retry
stores a second job. (memory:// cannot lose a reply; the store's side of it is in
tests/contract: test_jobs.py, test_job_workflows.py.)"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any
from urllib.parse import urlparse

import pytest

from runnel import App
from runnel.exceptions import NotConnected, Unavailable
from tests.support.apps import make_app
from tests.support.job_lost_replies import (
    MARKER,
    check_a_batch,
    check_a_workflow,
    check_one_job,
    counts,
    declare,
    enqueue_one,
)
from tests.support.proxy import Proxy

SETTINGS: dict[str, Any] = {"job_schedule_interval": 0.05, "job_heartbeat_timeout": 1}


@pytest.fixture
def proxy(redis_url: str) -> Iterator[Proxy]:
    url = urlparse(redis_url)
    p = Proxy(url.hostname or "127.0.0.1", url.port or 6379)
    yield p
    p.close()


def arming(proxy: Proxy) -> Callable[[bytes], threading.Event]:
    def arm(marker: bytes) -> threading.Event:
        proxy.arm(marker)
        return proxy.dropped

    return arm


Apps = tuple[App, App, list[str]]


@pytest.fixture
async def apps(
    request: pytest.FixtureRequest, proxy: Proxy, redis_url: str, app_name: str
) -> AsyncIterator[Apps]:
    """The enqueuer (through the proxy), the worker (direct), and the jobs' runs."""
    settings = {**SETTINGS, **getattr(request, "param", {})}
    enqueuer = make_app(app_name, proxy.url, **settings)
    worker = make_app(app_name, redis_url, **settings)
    declare(enqueuer)
    runs = declare(worker)
    yield enqueuer, worker, runs
    await enqueuer.aclose()
    await worker.aclose()


@pytest.mark.parametrize("sync", [False, True], ids=["delay", "delay_sync"])
@pytest.mark.parametrize("named", [False, True], ids=["generated_id", "job_id"])
async def test_a_job_whose_enqueue_reply_was_lost_is_stored_and_run_once(
    apps: Apps, proxy: Proxy, named: bool, sync: bool
) -> None:
    enqueuer, worker, runs = apps
    result = await enqueue_one(enqueuer, arming(proxy), named=named, sync=sync)
    await check_one_job(worker, runs, result)


async def test_concurrent_delays_sharing_a_lost_call_each_get_their_job_once(
    apps: Apps, proxy: Proxy
) -> None:
    await check_a_batch(*apps, arming(proxy))


@pytest.mark.parametrize("shape", ["chain", "group"])
async def test_a_workflow_whose_enqueue_reply_was_lost_is_stored_once(
    apps: Apps, proxy: Proxy, shape: str
) -> None:
    await check_a_workflow(*apps, arming(proxy), shape)


@pytest.mark.parametrize("apps", [{"idempotent_sends": False}], indirect=True)
async def test_without_identities_the_lost_reply_is_the_callers_and_a_retry_stores_twice(
    apps: Apps, proxy: Proxy
) -> None:
    """What the identities prevent: the enqueue raises, in doubt, though its job is in;
    the caller's own retry makes a second job (a generated id), or finds its id taken
    (``enqueued`` False: it cannot tell its own first try from another caller's)."""
    enqueuer, worker, _ = apps
    echo = enqueuer.jobs["echo"]
    await echo.delay("warm")
    for job_id in (None, "order-7"):
        proxy.arm(MARKER.encode())
        with pytest.raises(Unavailable) as lost:
            await echo.delay(MARKER, job_id=job_id)
        assert not isinstance(lost.value, NotConnected)
        again = await echo.delay(MARKER, job_id=job_id)
        assert again.enqueued is (job_id is None)
    assert (await counts(worker)).queued == 1 + 2 + 1  # warm, twice the first, once order-7
