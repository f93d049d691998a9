"""The limits' metric: starts put off by a job's rate_limit or concurrency_limit, counted
in ``runnel_jobs_limited_total`` with the limit as a label, scraped from ``/metrics``."""

from __future__ import annotations

import asyncio

from tests.streams.test_metrics import scraped_until
from tests.support.apps import HANG_GUARD, Running, make_app
from tests.support.metrics_scrape import Samples, total
from tests.support.ports import free_port


async def test_starts_put_off_by_a_limit_are_counted(redis_url: str, app_name: str) -> None:
    port = free_port()
    app = make_app(app_name, redis_url, metrics_port=port, metrics_host="127.0.0.1")
    gate = asyncio.Event()
    running = 0
    most = 0

    @app.job(concurrency_limit=1, queue="emails")
    async def single() -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await gate.wait()
        running -= 1

    @app.job(rate_limit="1/h")
    async def hourly() -> None: ...

    async with Running(app):
        singles = [await single.delay() for _ in range(3)]
        hourlies = [await hourly.delay() for _ in range(2)]

        def counted(s: Samples) -> bool:
            labels = {"app": app_name}
            return (
                total(s, "runnel_jobs_limited_total", job="single", limit="concurrency", **labels)
                >= 2
                and total(s, "runnel_jobs_limited_total", job="hourly", limit="rate", **labels) >= 1
            )

        samples = await scraped_until(port, counted, "the starts put off")
        assert total(samples, "runnel_jobs_limited_total", job="single", queue="emails") >= 2
        assert total(samples, "runnel_jobs_started_total", job="hourly", app=app_name) == 1
        gate.set()
        async with asyncio.timeout(HANG_GUARD):
            for result in singles:
                await result.get(timeout=HANG_GUARD)
        assert most == 1
        statuses = {str(await r.status()) for r in hourlies}
        assert statuses == {"SUCCESS", "SENT"}  # the second waits for its turn, an hour on
