"""Background tasks: ``@app.task``, ``@app.timer`` and ``@app.crontab``."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from runnel.background import BackgroundTask
from tests.support.apps import Running, make_app


async def test_task_once_timers_repeatedly_until_stop(redis_url: str, app_name: str) -> None:
    app = make_app(app_name, redis_url)
    calls: dict[str, int] = {
        "task": 0,
        "leader_task": 0,
        "failing_task": 0,
        "timer": 0,
        "failing": 0,
        "sync": 0,
    }

    @app.task
    async def started():
        calls["task"] += 1

    @app.task(on_leader=True)
    async def leader_started():
        calls["leader_task"] += 1

    @app.task
    async def failing_task():
        calls["failing_task"] += 1
        raise RuntimeError("task failed")

    @app.timer(interval=0.05)
    async def tick():
        calls["timer"] += 1

    @app.timer(interval=0.05)
    async def failing():
        calls["failing"] += 1
        raise RuntimeError("timer failed")

    @app.timer(interval=0.05)
    def sync_tick():  # a plain function runs in a thread
        calls["sync"] += 1

    kinds = {job.name.rsplit(".", 1)[-1]: job.kind for job in app.background}
    assert kinds == {
        "started": "task",
        "leader_started": "task",
        "failing_task": "task",
        "tick": "timer",
        "failing": "timer",
        "sync_tick": "timer",
    }
    assert next(j for j in app.background if j.func is leader_started).on_leader

    async with Running(app) as running:
        await running.until(
            lambda: calls["timer"] >= 4 and calls["failing"] >= 4 and calls["sync"] >= 4,
            "timers ran several times",
        )
        assert not running.done, "a failing timer must not stop the worker"
        assert await running.stop() == 0
    assert calls["task"] == 1
    assert calls["leader_task"] == 1
    assert calls["failing_task"] == 1

    after_stop = dict(calls)
    await asyncio.sleep(0.2)  # several intervals: nothing may run after the stop
    assert calls == after_stop


def test_crontab_registers_and_gives_the_delay_to_the_next_minute(
    redis_url: str, app_name: str
) -> None:
    app = make_app(app_name, redis_url)

    @app.crontab("* * * * *")
    async def every_minute():
        pass

    @app.crontab("45 17 * * *", timezone="Europe/Paris", on_leader=True)
    async def evening():
        pass

    job = next(j for j in app.background if j.func is every_minute)
    assert isinstance(job, BackgroundTask)
    assert job.kind == "crontab"
    assert job.spec == "* * * * *"
    assert job.next_delay(datetime(2024, 3, 10, 12, 0, 30, tzinfo=UTC)) == 30.0
    assert job.next_delay(datetime(2024, 3, 10, 12, 0, 59, 500_000, tzinfo=UTC)) == 0.5
    assert job.next_delay(datetime(2024, 12, 31, 23, 59, 1, tzinfo=UTC)) == 59.0
    assert job.next_delay(datetime(2024, 3, 10, 12, 1, 0, tzinfo=UTC)) == 60.0

    paris = ZoneInfo("Europe/Paris")
    late = next(j for j in app.background if j.func is evening)
    assert late.on_leader and late.timezone == paris
    assert late.next_delay(datetime(2024, 6, 1, 17, 44, 0, tzinfo=paris)) == 60.0
    assert late.next_delay(datetime(2024, 6, 1, 17, 46, 0, tzinfo=paris)) == 24 * 3600 - 60


def test_crontab_delay_is_real_seconds_across_a_dst_change(redis_url: str, app_name: str) -> None:
    app = make_app(app_name, redis_url, timezone="Europe/Paris")

    @app.crontab("* * * * *")
    async def every_minute():
        pass

    @app.crontab("45 17 * * *")
    async def evening():
        pass

    paris = ZoneInfo("Europe/Paris")
    minute = next(j for j in app.background if j.func is every_minute)
    daily = next(j for j in app.background if j.func is evening)
    # 2024-03-31 01:59:30 CET; the next minute boundary is 03:00:00 CEST, 30 s later.
    assert minute.next_delay(datetime(2024, 3, 31, 1, 59, 30, tzinfo=paris)) == 30.0
    # 2024-03-30 17:46 CET to 2024-03-31 17:45 CEST is 23 h - 60 s.
    assert daily.next_delay(datetime(2024, 3, 30, 17, 46, tzinfo=paris)) == 23 * 3600 - 60
