"""Cancels and progress inside one worker, on ``memory://`` and on a real redis-server: a
job that swallows its CancelledError, a cancel heard before the job started, and what
``report_progress`` accepts and keeps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from runnel import App
from runnel.jobs import (
    JobCancelled,
    JobStatus,
    current_job,
    report_progress,
    report_progress_sync,
)
from runnel.jobs.control import JobControls
from runnel.jobs.model import Delivery
from runnel.metrics.stats import JobsStats
from runnel.testing import memory_url
from tests.support.apps import HANG_GUARD, Running, eventually, make_app

FAST: dict[str, Any] = {"default_grace_period": 1, "job_heartbeat_timeout": 1}


@pytest.fixture(params=["memory", "redis"])
async def new_app(
    request: pytest.FixtureRequest, app_name: str
) -> AsyncIterator[Callable[[], App]]:
    apps: list[App] = []

    def make() -> App:
        url = memory_url() if request.param == "memory" else request.getfixturevalue("redis_url")
        app = make_app(app_name, url, **FAST)
        apps.append(app)
        return app

    yield make
    for app in apps:
        await app.aclose()


async def test_a_job_that_swallows_its_cancel_stays_cancelled(
    new_app: Callable[[], App], caplog: pytest.LogCaptureFixture
) -> None:
    """What it returns is dropped quietly: the store keeps CANCELLED, no result, and no
    warning about an outcome refused."""
    app = new_app()
    started = asyncio.Event()
    swallowed = asyncio.Event()

    @app.job(retries=3)
    async def stubborn() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            swallowed.set()
        return "finished anyway"

    caplog.set_level(logging.INFO, logger="runnel.jobs")
    async with Running(app) as running:
        result = await stubborn.delay()
        async with asyncio.timeout(HANG_GUARD):
            await started.wait()
        assert await result.cancel()
        async with asyncio.timeout(HANG_GUARD):
            await swallowed.wait()
        await eventually(lambda: not running.worker.job_executor.running)  # type: ignore[union-attr]
        with pytest.raises(JobCancelled):
            await result.get(timeout=HANG_GUARD)
        record = await result.info()
        assert record is not None
        assert (record.status, record.tries) == (JobStatus.CANCELLED, 1)
        stats = running.worker.job_executor.stats.job("stubborn")  # type: ignore[union-attr]
        assert (stats.started, stats.succeeded, stats.cancelled) == (1, 0, 1)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert f"job stubborn {result.id} was cancelled; stopping it" in caplog.text


async def test_a_cancel_heard_before_the_job_started_keeps_it_from_running(
    new_app: Callable[[], App],
) -> None:
    """The notice can come before the take's answer: the job must then not start."""
    app = new_app()
    stats = JobsStats()
    controls = JobControls(app.job_store, "e1", app.clock, stats)
    controls.cancel("early")  # nothing of that id runs here yet
    assert controls.told("early")
    delivery = Delivery(b"1-0", "early", "add", b"{}", "json", 1, 0, True)
    signals = controls.begin(delivery)
    assert signals.cancelled.is_set()
    assert not controls.told("early")
    assert stats.job("add").cancelled == 1
    # A job it was not told of runs, and a cancel then reaches it.
    other = controls.begin(Delivery(b"2-0", "other", "add", b"{}", "json", 1, 0, True))
    assert not other.cancelled.is_set()


async def test_progress_is_checked_and_kept_as_documented(new_app: Callable[[], App]) -> None:
    app = new_app()
    outcomes: list[str] = []

    @app.job
    async def steps() -> None:
        for bad in (1.5, -0.1, float("nan")):
            with pytest.raises(ValueError, match="from 0 to 1"):
                await report_progress(bad)
        for wrong in ("half", True, None):
            with pytest.raises(TypeError):
                await report_progress(wrong)  # type: ignore[arg-type]
        with pytest.raises(RuntimeError, match="plain def job"):
            report_progress_sync(0.5)
        await report_progress(1, "  a\tlong\n" + "x" * 300)
        outcomes.append(current_job().id)  # type: ignore[union-attr]

    @app.job
    def plain() -> None:
        report_progress_sync(0.25, "a quarter")

    await report_progress(0.5, "outside a job: nothing to keep")
    async with Running(app):
        first = await steps.delay()
        second = await plain.delay()
        assert await first.get(timeout=HANG_GUARD) is None
        assert await second.get(timeout=HANG_GUARD) is None
    progress = await first.progress()
    assert progress is not None
    assert (progress.fraction, progress.tries) == (1.0, 1)
    assert progress.message == "a long " + "x" * 190 + "..."
    assert len(progress.message) == 200
    later = await second.progress()
    assert later is not None and (later.fraction, later.message) == (0.25, "a quarter")
