"""Enqueues on a Redis Cluster whose reply was lost: the connection to the master of the
app's job queue drops with the reply of the enqueue script in flight (a proxy per
master, as in test_lost_replies.py). The enqueue is sent again under its call's
identity: each job is stored and run once, and the caller is answered as the first
time (``enqueued`` True, a workflow counted), with or without a ``job_id``."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from runnel import App
from runnel_redis.layout import Cluster
from tests.redis_cluster.test_lost_replies import app_through, proxies  # noqa: F401 (fixture)
from tests.support.apps import FAST
from tests.support.job_lost_replies import (
    check_a_batch,
    check_a_workflow,
    check_one_job,
    declare,
    enqueue_one,
)
from tests.support.proxy import Proxy
from tests.support.redis_cluster import RedisClusterProcesses

SETTINGS: dict[str, Any] = {"job_schedule_interval": 0.05, "job_heartbeat_timeout": 1}

Apps = tuple[App, App, list[str]]


@pytest.fixture
async def apps(
    redis_cluster: RedisClusterProcesses,
    proxies: dict[int, Proxy],  # noqa: F811
) -> AsyncIterator[Apps]:
    """The enqueuer (through the proxies), the worker (direct), and the jobs' runs."""
    enqueuer = app_through(proxies, **SETTINGS)
    worker = App(name=enqueuer.name, redis_url=redis_cluster.url, **{**FAST, **SETTINGS})
    declare(enqueuer)
    runs = declare(worker)
    yield enqueuer, worker, runs
    await enqueuer.aclose()
    await worker.aclose()


def arming(
    app: App, cluster: RedisClusterProcesses, by_port: dict[int, Proxy]
) -> Callable[[bytes], threading.Event]:
    """Arms the proxy of the master holding the app's job queue (one slot: the app's)."""
    proxy = by_port[cluster.master_of(Cluster().job_queue(app.name)).port]

    def arm(marker: bytes) -> threading.Event:
        proxy.arm(marker)
        return proxy.dropped

    return arm


@pytest.mark.parametrize("sync", [False, True], ids=["delay", "delay_sync"])
@pytest.mark.parametrize("named", [False, True], ids=["generated_id", "job_id"])
async def test_a_job_whose_enqueue_reply_was_lost_is_stored_and_run_once(
    apps: Apps,
    redis_cluster: RedisClusterProcesses,
    proxies: dict[int, Proxy],  # noqa: F811
    named: bool,
    sync: bool,
) -> None:
    enqueuer, worker, runs = apps
    arm = arming(enqueuer, redis_cluster, proxies)
    result = await enqueue_one(enqueuer, arm, named=named, sync=sync)
    await check_one_job(worker, runs, result)


async def test_concurrent_delays_sharing_a_lost_call_each_get_their_job_once(
    apps: Apps,
    redis_cluster: RedisClusterProcesses,
    proxies: dict[int, Proxy],  # noqa: F811
) -> None:
    await check_a_batch(*apps, arming(apps[0], redis_cluster, proxies))


@pytest.mark.parametrize("shape", ["chain", "group"])
async def test_a_workflow_whose_enqueue_reply_was_lost_is_stored_once(
    apps: Apps,
    redis_cluster: RedisClusterProcesses,
    proxies: dict[int, Proxy],  # noqa: F811
    shape: str,
) -> None:
    await check_a_workflow(*apps, arming(apps[0], redis_cluster, proxies), shape)
