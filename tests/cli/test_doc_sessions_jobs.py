"""The ``runnel jobs`` sessions of docs/cli.md, played through the real command line against
a real redis-server and a real ``runnel worker``, on a ``shop/app.py`` with the jobs the
docs use (charge, report, resize; for the periodic session, the three periodic jobs of
docs/jobs.md). What each step prints must be what the page shows, with what changes from
run to run (job ids, times and ticks, executor ids and pids, a traceback's path and line)
as placeholders.

The state a session starts from (jobs queued before it, one held running) is set up here
with the same commands; tests/cli/test_doc_sessions.py lists these sessions as run here.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from runnel_redis import keys
from tests.cli.test_doc_sessions import normalised, session, steps
from tests.support.processes import WorkerProcess, cli, cli_on_terminal, env_with, wait_for

SHOP = """
import asyncio
from pathlib import Path

from runnel import App
from runnel.jobs import report_progress

# Short retry delays, so that a failing job is dead within a second.
app = App(name="shop", job_backoff_base=0.05, job_backoff_cap=0.2, job_heartbeat_timeout=3)


@app.job(retries=3)
async def resize(image_id: int, width: int = 100) -> str:
    await report_progress(0.0, "loading")
    await report_progress(0.4, "resizing")
    while Path(f"hold-{image_id}").exists():  # the test keeps this image's job running
        await asyncio.sleep(0.05)
    await report_progress(0.9, "saving")
    return f"images/{image_id}-{width}.png"


@app.job(retries=2)
async def charge(order_id: int, amount: float) -> dict:
    if amount < 0:
        raise ValueError(f"cannot charge {amount}")
    return {"order": order_id, "amount": amount}


@app.job
async def report(day: str) -> None:
    pass
"""

PLACEHOLDERS = [
    (r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", "TIME"),
    (r"\b[0-9a-f]{32}\b", "JOB_ID"),
    (r"\b[\w.-]+:\d+:[0-9a-f]{8}\s+[\w.-]+ pid \d+", "EXECUTOR HOST pid PID"),
    (r"\b[\w.-]+:\d+:[0-9a-f]{8}\b", "EXECUTOR"),
    (r"\bin \d+\.\ds\)", "in N.Ns)"),
    (r"@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b", "@TICK"),
    (r'File "[^"]*/shop/app\.py", line \d+', 'File ".../shop/app.py", line N'),
]
"""What differs from run to run, beyond normalised()'s entry ids and clock times."""


def placeheld(text: str) -> str:
    for pattern, placeholder in PLACEHOLDERS:
        text = re.sub(pattern, placeholder, text)
    return normalised(text)


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "app.py").write_text(SHOP)
    return tmp_path


def run(cwd: Path, redis_url: str, *args: str, **env: str) -> str:
    done = cli(*args, cwd=cwd, env=env_with(redis_url, **env))
    assert done.returncode == 0, done.stderr
    return done.stdout


def play(
    heading: str,
    index: int,
    cwd: Path,
    redis_url: str,
    after: dict[int, Callable[[], object]] | None = None,
) -> None:
    """Run each step of the session; ``after[i]`` is called once step ``i`` has run. A
    shown ``[y/N]: n`` is a prompt answered with ``n``, typed on a terminal (so not in the
    output)."""
    for i, (env, args, shown) in enumerate(steps(session(("cli.md", heading, index)).body)):
        prompt = re.search(r"\[y/N\]: (\w)\n", shown)
        environ = env_with(redis_url, **env)
        if prompt:
            shown = shown.replace(prompt.group(0), "[y/N]: ", 1)
            code, out, err = cli_on_terminal(
                *args, cwd=cwd, env=environ, answer=prompt.group(1) + "\n"
            )
        else:
            done = cli(*args, cwd=cwd, env=environ)
            code, out, err = done.returncode, done.stdout, done.stderr
        printed = out + err
        assert "Traceback" not in err or "Traceback" in shown, err
        assert placeheld(printed) == placeheld(shown), (args, printed)
        failed = "\nError: " in "\n" + printed or printed.endswith("Aborted!\n")
        assert (code != 0) == failed, (args, code)
        if after and i in after:
            after[i]()


def status(cwd: Path, redis_url: str, job_id: str) -> dict[str, object]:
    shown = run(cwd, redis_url, "jobs", "show", "shop.app:app", job_id, "--json")
    found: dict[str, object] = json.loads(shown)
    return found


def dead(cwd: Path, redis_url: str) -> list[dict[str, str]]:
    found: list[dict[str, str]] = json.loads(
        run(cwd, redis_url, "jobs", "dead", "list", "shop.app:app", "--json")
    )
    return found


def test_sessions_that_need_no_worker(shop: Path, redis_url: str) -> None:
    play("runnel jobs send", 1, shop, redis_url)  # mistakes: nothing enqueued
    play("runnel jobs show", 2, shop, redis_url)
    play("runnel jobs dead purge", 1, shop, redis_url)  # Redis unreachable
    # "Before any worker ran, with two jobs queued and one enqueued with --countdown 600":
    run(shop, redis_url, "jobs", "send", "shop.app:resize", "[1]")
    run(shop, redis_url, "jobs", "send", "shop.app:resize", "[2]")
    run(shop, redis_url, "jobs", "send", "shop.app:resize", "[3]", "--countdown", "600")
    play("runnel jobs info", 0, shop, redis_url)


def test_a_worker_busy_on_two_long_jobs(shop: Path, redis_url: str) -> None:
    """ "With one worker (--concurrency 2) busy on two long jobs": two results of an
    earlier worker's, two queued and one scheduled, as the page has them."""
    run(shop, redis_url, "jobs", "send", "shop.app:resize", "[1]")
    run(shop, redis_url, "jobs", "send", "shop.app:resize", "[2]")
    earlier = WorkerProcess("shop.app:app", shop, env_with(redis_url))
    try:
        wait_for(lambda: "results           2" in info(shop, redis_url))
    finally:
        assert earlier.stop() == 0, earlier.output
    run(shop, redis_url, "jobs", "send", "shop.app:resize", "[3]", "--countdown", "600")
    for n in (4, 5, 6, 7):
        (shop / f"hold-{n}").touch()
        run(shop, redis_url, "jobs", "send", "shop.app:resize", f"[{n}]")
    worker = WorkerProcess("shop.app:app", shop, env_with(redis_url), "--concurrency", "2")
    try:
        [(_, _, shown)] = steps(session(("cli.md", "runnel jobs info", 1)).body)
        # The executor's figures are as of its last heartbeat: wait for the one that
        # counts both jobs running.
        wait_for(lambda: placeheld(info(shop, redis_url)) == placeheld(shown), timeout=60)
        play("runnel jobs info", 1, shop, redis_url)
    finally:
        for n in (4, 5, 6, 7):
            (shop / f"hold-{n}").unlink()
        assert worker.stop() == 0, worker.output


def info(cwd: Path, redis_url: str) -> str:
    return run(cwd, redis_url, "jobs", "info", "shop.app:app")


def test_sessions_with_a_worker_in_the_order_of_the_page(shop: Path, redis_url: str) -> None:
    worker = WorkerProcess("shop.app:app", shop, env_with(redis_url))
    try:

        def died(count: int) -> Callable[[], object]:
            return lambda: wait_for(lambda: len(dead(shop, redis_url)) == count)

        # charge-41 dies before the next charge is sent, so the dead list's order is the
        # page's (oldest death first).
        play("runnel jobs send", 0, shop, redis_url, after={1: died(1)})
        play("runnel jobs dead list", 0, shop, redis_url)
        play("runnel jobs dead replay", 0, shop, redis_url, after={0: died(2)})
        play("runnel jobs dead purge", 0, shop, redis_url)

        # resize-7 held running at 40 %, resize-8 due in ten minutes.
        (shop / "hold-7").touch()
        run(shop, redis_url, "jobs", "send", "shop.app:resize", "[7]", "--job-id", "resize-7")
        wait_for(lambda: (status(shop, redis_url, "resize-7").get("progress") or {}) != {})
        play("runnel jobs show", 1, shop, redis_url)
        eight = ["[8]", "--job-id", "resize-8", "--countdown", "600"]
        run(shop, redis_url, "jobs", "send", "shop.app:resize", *eight)
        play("runnel jobs cancel", 0, shop, redis_url)
        play("runnel jobs cancel", 1, shop, redis_url)
    finally:
        assert worker.stop() == 0, worker.output


def test_a_job_between_two_tries_beside_a_finished_one(shop: Path, redis_url: str) -> None:
    """charge-41 failed its first try and waits for its second: the app's backoff is ten
    minutes or more here, so it is surely still RETRY when shown. resize gets the page's
    id, so that the session's own command finds it."""
    app = shop / "shop" / "app.py"
    app.write_text(SHOP.replace("job_backoff_base=0.05, job_backoff_cap=0.2", LONG_BACKOFF))
    worker = WorkerProcess("shop.app:app", shop, env_with(redis_url))
    try:
        resize = ["[7]", '{"width": 200}', "--job-id", "2775da796e52fc3aa2ff1653237cafda"]
        run(shop, redis_url, "jobs", "send", "shop.app:resize", *resize)
        wait_for(lambda: status(shop, redis_url, resize[-1])["status"] == "SUCCESS")
        run(shop, redis_url, "jobs", "send", "shop.app:charge", "[41, -5]", "--job-id", "charge-41")
        wait_for(lambda: status(shop, redis_url, "charge-41")["status"] == "RETRY")
        play("runnel jobs show", 0, shop, redis_url)
    finally:
        assert worker.stop() == 0, worker.output


LONG_BACKOFF = "job_backoff_base=600, job_backoff_cap=3600"
"""A first retry 600 to 900 s after the failure (base * 2, jittered by 0.5 to 1.5)."""


PERIODIC = """
from runnel import App

app = App(name="shop", job_heartbeat_timeout=3)


@app.job(cron="*/5 * * * *")  # every five minutes, UTC
async def refresh_rates() -> None:
    pass


@app.job(cron="30 7 * * mon-fri", timezone="Europe/Paris", missed="skip")
def morning_digest(region: str = "eu") -> None:
    pass


@app.job(cron="* * * * * */15")  # every 15 seconds: a sixth field, seconds
async def heartbeat() -> None:
    pass
"""
"""The three periodic jobs of docs/jobs.md; executors beat every second, so that the
executor line counts each success soon after it."""


def test_a_worker_running_the_periodic_jobs(shop: Path, redis_url: str) -> None:
    """The page's worker ran across 11:55:00, so that refresh_rates and heartbeat each
    had a tick run, and morning_digest a tick settled without running (its first). Here
    an earlier worker's settled ticks, one period before the last tick of refresh_rates
    and of heartbeat, have the new worker run the tick it finds missed (``run_once``)
    at once, instead of waiting for the next five-minute mark; heartbeat's next tick
    makes the third result."""
    (shop / "shop" / "app.py").write_text(PERIODIC)
    # A five-minute mark inside the test would give refresh_rates a second tick: start
    # after the next one when it is less than a minute away.
    to_mark = 300 - time.time() % 300
    if to_mark < 60:
        time.sleep(to_mark + 0.5)
    now_ms = int(time.time() * 1000)
    client = redis.Redis.from_url(redis_url)
    try:
        client.hset(
            keys.jobs_prefix("shop") + "ticks",
            mapping={
                "refresh_rates": now_ms - now_ms % 300_000 - 300_000,
                "heartbeat": now_ms - now_ms % 15_000 - 15_000,
            },
        )
    finally:
        client.close()
    [(_, _, shown)] = steps(session(("cli.md", "runnel jobs info", 2)).body)
    worker = WorkerProcess("shop.app:app", shop, env_with(redis_url))
    try:
        # Results come one by one, and the fourth 15 s after the third: wait for the
        # page's three, then play.
        wait_for(lambda: placeheld(info(shop, redis_url)) == placeheld(shown), timeout=90)
        play("runnel jobs info", 2, shop, redis_url)
    finally:
        assert worker.stop() == 0, worker.output
    # 07:30 in Paris, whatever the season.
    assert re.search(r"morning_digest@\S+T0[56]:30:00Z: UNKNOWN", info(shop, redis_url))
