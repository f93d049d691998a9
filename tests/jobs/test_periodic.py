"""Periodic jobs (``@app.job(cron=...)``) in one process, on both stores: one run per tick
whatever the number of workers, missed ticks run once or skipped, time zones; and bad
declarations refused. Real processes, kill -9 and a Redis Cluster:
test_periodic_processes.py.

Most tests run on a ``ManualClock`` (a minute's tick is a clock move, not a wait); the
only real waits are hang guards and "nothing more happens over a few scheduler intervals".
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from runnel import App
from runnel.exceptions import Misconfigured
from runnel.jobs import ManualClock, current_job
from runnel.jobs.periodic import Cron, settle, tick_id
from runnel.testing import TestRun, run
from tests.support.metrics_scrape import Samples, scrape
from tests.support.ports import free_port

T0 = 1_700_000_040.0
"""2023-11-14T22:14:00Z: a whole minute."""

QUIET = 0.4
"""Several scheduler intervals of the test runs (0.05 s): a tick due would be settled."""


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


async def until(check: Callable[[], Any], t: TestRun) -> None:
    """Wait until ``check()`` holds (a hang guard, not a time limit under test)."""
    async with asyncio.timeout(t.wait):
        while True:
            if check():
                return
            await asyncio.sleep(0.02)


async def settled(t: TestRun, name: str, tick: float) -> None:
    """Wait until the job's last settled tick is ``tick``."""
    async with asyncio.timeout(t.wait):
        while True:
            if (await t.job_store.last_ticks([name]))[name] == tick:
                return
            await asyncio.sleep(0.02)


def ticking_app(name: str, **settings: Any) -> tuple[App, list[str]]:
    """An app with one periodic job, every minute, that records the id of each run."""
    missed = settings.pop("missed", None)
    app = App(name=name, job_heartbeat_timeout=1, default_grace_period=1, **settings)
    runs: list[str] = []

    @app.job(cron="* * * * *", missed=missed)
    async def minutely() -> None:
        ctx = current_job()
        assert ctx is not None
        runs.append(ctx.id)

    return app, runs


async def test_three_workers_enqueue_each_tick_once(app_name: str, store_url: str) -> None:
    app, runs = ticking_app(app_name)
    clock = ManualClock(T0 + 20)
    async with run(app, store=store_url, clock=clock, workers=3) as t:
        # The first worker to see the new job settles the tick that was due (22:14), which
        # does not run: the job starts with its next tick.
        await settled(t, "minutely", T0)
        for minute in range(1, 4):
            clock.advance(60)
            await until(lambda minute=minute: len(runs) == minute, t)
        await asyncio.sleep(QUIET)
        await t.join()
        assert runs == [
            "minutely@2023-11-14T22:15:00Z",
            "minutely@2023-11-14T22:16:00Z",
            "minutely@2023-11-14T22:17:00Z",
        ]
        assert (await t.job_store.last_ticks(["minutely"]))["minutely"] == T0 + 180


@pytest.mark.parametrize("missed", ["run_once", "skip"])
async def test_ticks_missed_while_no_worker_ran(app_name: str, store_url: str, missed: str) -> None:
    """Every worker down over five ticks: ``run_once`` runs them once (as the latest of
    them), ``skip`` not at all; either way the next tick runs as usual, and never one run
    per missed tick."""
    app, runs = ticking_app(app_name, job_cron_grace=10, missed=missed)
    clock = ManualClock(T0)
    async with run(app, store=store_url, clock=clock, workers=2) as t:
        await settled(t, "minutely", T0)
        clock.advance(60)
        await until(lambda: len(runs) == 1, t)
        await t.stop_worker()
        await t.stop_worker()
        clock.advance(5 * 60 + 30)  # 22:20:30: 22:16 to 22:20 missed, 22:20 30 s late
        await t.start_worker()
        await t.start_worker()
        await settled(t, "minutely", T0 + 6 * 60)
        await asyncio.sleep(QUIET)
        await t.join()
        after_gap = ["minutely@2023-11-14T22:20:00Z"] if missed == "run_once" else []
        assert runs == ["minutely@2023-11-14T22:15:00Z", *after_gap]
        clock.advance(30)
        await until(lambda: runs[-1:] == ["minutely@2023-11-14T22:21:00Z"], t)
        await asyncio.sleep(QUIET)
        assert runs == ["minutely@2023-11-14T22:15:00Z", *after_gap, runs[-1]]


async def test_a_tick_settled_late_but_within_the_grace_runs(app_name: str, store_url: str) -> None:
    """A tick found 30 s late with a grace of 60 s is on time: it runs (both ways), and
    with run_once so does the one missed before it."""
    app, runs = ticking_app(app_name, job_cron_grace=60)
    clock = ManualClock(T0)
    async with run(app, store=store_url, clock=clock, workers=0) as t:
        await t.start_worker()
        await settled(t, "minutely", T0)
        await t.stop_worker()
        clock.advance(2 * 60 + 30)  # 22:16:30: 22:15 missed, 22:16 due 30 s ago
        await t.start_worker()
        await until(lambda: len(runs) == 2, t)
        await asyncio.sleep(QUIET)
        assert runs == ["minutely@2023-11-14T22:15:00Z", "minutely@2023-11-14T22:16:00Z"]


async def test_ticks_by_the_wall_clock_with_the_leader_stopped_hard(
    app_name: str, store_url: str
) -> None:
    """Every second for a few seconds, three workers; the leader is cancelled at once (as
    a second signal does) mid-run. The jobs count the ticks: one run per tick, none
    missing, whoever settled them."""
    app = App(name=app_name, job_heartbeat_timeout=1, default_grace_period=1)
    runs: list[str] = []

    @app.job(cron="* * * * * *")
    async def each_second() -> None:
        ctx = current_job()
        assert ctx is not None
        runs.append(ctx.id)

    async with run(
        app, store=store_url, workers=3, settings={"leadership_poll_interval": 100}
    ) as t:
        await until(lambda: len(runs) >= 3, t)
        await until(lambda: any(w.is_leader() for w in t.workers), t)
        [leader] = [w for w in t.workers if w.is_leader()]
        await t.stop_worker(leader, hard=True)
        seen = len(runs)
        await until(lambda: len(runs) >= seen + 3, t)
        await t.stop_worker()
        await t.stop_worker()
    ticks = sorted({datetime.strptime(r.split("@")[1], "%Y-%m-%dT%H:%M:%SZ") for r in runs})
    # A job the hard stop cancelled mid-run goes back to the queue and runs again: its id
    # twice. Any other id twice would be a tick enqueued twice.
    assert len(runs) - len(set(runs)) <= 1, runs
    seconds = [int(d.replace(tzinfo=UTC).timestamp()) for d in ticks]
    assert seconds == list(range(seconds[0], seconds[-1] + 1)), runs


async def test_a_time_zone_places_the_ticks(app_name: str, store_url: str) -> None:
    """09:00 in Paris is 08:00 UTC in winter and 07:00 UTC in summer (tick ids are UTC)."""
    app = App(name=app_name, job_heartbeat_timeout=1, default_grace_period=1)
    runs: list[str] = []

    @app.job(cron="0 9 * * *", timezone="Europe/Paris")
    def morning() -> None:
        ctx = current_job()
        assert ctx is not None
        runs.append(ctx.id)

    clock = ManualClock(at("2024-03-29T12:00:00"))
    async with run(app, store=store_url, clock=clock) as t:
        await settled(t, "morning", at("2024-03-29T08:00:00"))
        clock.advance(24 * 3600)  # 2024-03-30T12:00Z
        await until(lambda: len(runs) == 1, t)
        clock.advance(24 * 3600)  # 2024-03-31T12:00Z: summer time since 01:00Z
        await until(lambda: len(runs) == 2, t)
    assert runs == ["morning@2024-03-30T08:00:00Z", "morning@2024-03-31T07:00:00Z"]


async def test_a_periodic_job_can_still_be_enqueued_by_hand(app_name: str, store_url: str) -> None:
    app, runs = ticking_app(app_name)
    clock = ManualClock(T0)
    async with run(app, store=store_url, clock=clock) as t:
        result = await app.jobs["minutely"].delay(job_id="by-hand")
        await result.get(timeout=t.wait)
        assert runs == ["by-hand"]


async def test_ticks_are_counted_in_the_metrics(app_name: str, store_url: str) -> None:
    """``runnel_jobs_ticks_total``: a tick on time, then a gap of missed ticks (the clock
    jumps past the grace) that one job runs once and the other skips; each counted with
    the queue its ticks go to."""
    port = free_port()
    app = App(name=app_name, job_heartbeat_timeout=1, default_grace_period=1, job_cron_grace=10)

    @app.job(cron="* * * * *")
    async def once() -> None: ...

    @app.job(cron="* * * * *", missed="skip", queue="reports")
    async def skipper() -> None: ...

    clock = ManualClock(T0)
    metrics = {"metrics_port": port, "metrics_host": "127.0.0.1"}
    async with run(app, store=store_url, clock=clock, settings=metrics) as t:
        await settled(t, "once", T0)
        await settled(t, "skipper", T0)
        clock.advance(60)
        await settled(t, "once", T0 + 60)
        await settled(t, "skipper", T0 + 60)
        clock.advance(5 * 60 + 30)
        await settled(t, "once", T0 + 6 * 60)
        await settled(t, "skipper", T0 + 6 * 60)
        want = {
            ("once", "default", "on_time"): 1,
            ("once", "default", "caught_up"): 1,
            ("skipper", "reports", "on_time"): 1,
            ("skipper", "reports", "skipped"): 1,
        }

        def counted(samples: Samples) -> bool:
            got = {
                (labels["job"], labels["queue"], labels["how"]): value
                for name, labels, value in samples
                if name == "runnel_jobs_ticks_total" and labels.get("app") == app_name
            }
            return got == want

        async with asyncio.timeout(t.wait):
            while True:
                if counted(await asyncio.to_thread(scrape, port)):
                    break
                await asyncio.sleep(0.2)


# The decision, on its own.

MINUTELY = Cron.declare("* * * * *")


@pytest.mark.parametrize(
    ("missed", "now", "runs", "gap"),
    [
        # On time: the due tick alone.
        ("run_once", T0 + 60.5, [(T0 + 60, "on_time")], None),
        ("skip", T0 + 60.5, [(T0 + 60, "on_time")], None),
        # Two due, the latest on time: a short stall; the other is missed.
        ("run_once", T0 + 120.5, [(T0 + 60, "caught_up"), (T0 + 120, "on_time")], (60, 60)),
        ("skip", T0 + 120.5, [(T0 + 120, "on_time")], (60, 60)),
        # Five due, the latest late: all missed; at most one run.
        ("run_once", T0 + 300 + 20, [(T0 + 300, "caught_up")], (60, 300)),
        ("skip", T0 + 300 + 20, [], (60, 300)),
    ],
)
def test_settle_decides_on_time_and_missed_ticks(
    missed: str, now: float, runs: list[tuple[float, str]], gap: tuple[int, int] | None
) -> None:
    cron = Cron.declare("* * * * *", missed=missed)
    due = cron.latest(now)
    assert due is not None
    plan = settle(cron, T0, due, now, grace=10)
    assert plan.runs == runs
    assert plan.missed == (None if gap is None else (T0 + gap[0], T0 + gap[1]))


def test_settle_starts_a_new_job_with_its_next_tick() -> None:
    assert settle(MINUTELY, None, T0, T0 + 1, grace=10).runs == []


def test_ticks_and_their_ids() -> None:
    assert MINUTELY.latest(T0) == T0  # a tick is due at its own second
    assert MINUTELY.latest(T0 + 59.9) == T0
    assert MINUTELY.after(T0) == T0 + 60
    assert MINUTELY.before(T0) == T0 - 60
    seconds = Cron.declare("* * * * * */10")  # a sixth field: seconds
    assert seconds.after(T0 + 1) == T0 + 10
    assert tick_id("report", T0) == "report@2023-11-14T22:14:00Z"


# Bad declarations: one clear error when the module is imported, nothing declared.


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cron": "61 * * * *"}, "job 'beat': invalid cron expression '61 * * * *': "),
        ({"cron": "every minute"}, "job 'beat': invalid cron expression 'every minute': "),
        ({"cron": ""}, "job 'beat': cron must be a cron expression such as '*/5 * * * *'"),
        ({"cron": 5}, "job 'beat': cron must be a cron expression"),
        ({"cron": "0 0 31 2 *"}, "job 'beat': cron expression '0 0 31 2 *' never comes due"),
        (
            {"cron": "* * * * *", "timezone": "Mars/Olympus_Mons"},
            "job 'beat': unknown time zone 'Mars/Olympus_Mons'",
        ),
        (
            {"cron": "* * * * *", "missed": "all"},
            "job 'beat': missed must be 'run_once' or 'skip', not 'all'",
        ),
        ({"timezone": "UTC"}, "job 'beat': timezone= and missed= need cron="),
        ({"missed": "skip"}, "job 'beat': timezone= and missed= need cron="),
    ],
)
def test_bad_periodic_declarations_are_refused(
    app: App, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(Misconfigured) as refused:

        @app.job(**options)
        async def beat() -> None: ...

    assert str(refused.value).startswith(message), str(refused.value)
    assert app.jobs == {}


def test_a_periodic_job_needs_no_arguments(app: App) -> None:
    with pytest.raises(Misconfigured, match="job 'resize': a periodic job is called without"):

        @app.job(cron="* * * * *")
        async def resize(image_id: int) -> None: ...

    @app.job(cron="* * * * *")
    async def defaults(image_id: int = 7) -> None: ...

    assert list(app.jobs) == ["defaults"]
    assert app.jobs["defaults"].periodic == Cron.declare("* * * * *")
