"""Rate and concurrency limits of jobs across real worker processes (docs/jobs.md, "Rate
and concurrency limits").

The app module (``limitsapp.py`` in ``tmp_path``) declares a job limited to 50 starts a
second that records its own start time in Redis, a job limited to 2 at once that counts
itself in and out of a Redis counter, and a gated job limited to 2 at once that runs until
the test sets its gate. Workers are ``runnel worker`` processes (a supervisor of three, or
three of their own when one is to be killed). Only ``redis_url`` says where Redis is, so
tests/redis_cluster/ runs these again on a Redis Cluster.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runnel.jobs import JobStatus
from runnel_redis.layout import KeyLayout, layout_for
from tests.support.processes import WorkerProcess, cli, env_with, wait_for
from tests.support.worker_cluster import client_for

MODULE = "limitsapp"
HANG = 120
"""Hang guard (seconds) of every wait: no assertion is made on how long anything took."""

APP_SOURCE = """
import asyncio
import os
import time

from runnel import App

app = App(
    name={app_name!r},
    redis_url={redis_url!r},
    default_grace_period=1,
    job_heartbeat_timeout=2,
    job_backoff_base=0.05,
    job_concurrency=8,
)


@app.job(rate_limit="50/s", retries=0)
async def paced(n: int) -> None:
    await app.redis.rpush("starts", repr(time.time()))


@app.job(concurrency_limit=2, retries=0)
async def capped(n: int) -> None:
    r = app.redis
    level = await r.incr("running")
    await r.rpush("levels", level)
    try:
        await asyncio.sleep(0.03)
    finally:
        await r.decr("running")


@app.job(concurrency_limit=2, retries=3)
async def gated(n: int) -> None:
    await app.redis.rpush("gated", f"{{n}}:{{os.getpid()}}")
    while not await app.redis.exists("gate"):
        await asyncio.sleep(0.02)
"""


@dataclass
class Project:
    dir: Path
    app_name: str
    redis_url: str
    client: Any
    layout: KeyLayout
    module: ModuleType
    workers: list[WorkerProcess]

    def start(self, *args: str) -> WorkerProcess:
        worker = WorkerProcess(f"{MODULE}:app", self.dir, env_with(self.redis_url), *args)
        self.workers.append(worker)
        return worker

    def enqueue(self, job: str, count: int) -> list[str]:
        app = self.module.app
        ids = [f"{job}-{n}" for n in range(count)]

        async def go() -> None:
            try:
                fn = app.jobs[job]
                for first in range(0, count, 100):
                    batch = range(first, min(first + 100, count))
                    await asyncio.gather(*(fn.delay(n, job_id=ids[n]) for n in batch))
            finally:
                await app.aclose()

        asyncio.run(go())
        return ids

    def statuses(self, ids: list[str]) -> dict[str, JobStatus]:
        app = self.module.app

        async def go() -> dict[str, JobStatus]:
            try:
                return {i: await app.job_store.status(i) for i in ids}
            finally:
                await app.aclose()

        return asyncio.run(go())

    def wait_succeeded(self, ids: list[str]) -> None:
        def done() -> bool:
            for w in self.workers:
                assert w.proc.poll() is None, w.output
            return set(self.statuses(ids).values()) == {JobStatus.SUCCESS}

        wait_for(done, HANG, interval=0.5)

    def executors(self) -> dict[str, dict[str, Any]]:
        raw = self.client.hgetall(self.layout.job_executors(self.app_name))
        return {k.decode(): json.loads(v) for k, v in raw.items()}

    def wait_ready(self, count: int) -> None:
        wait_for(lambda: len(self.executors()) >= count, HANG)


@pytest.fixture
def project(tmp_path: Path, app_name: str, redis_url: str) -> Iterator[Project]:
    (tmp_path / f"{MODULE}.py").write_text(
        textwrap.dedent(APP_SOURCE.format(app_name=app_name, redis_url=redis_url))
    )
    name = f"{MODULE}_{app_name}"
    spec = importlib.util.spec_from_file_location(name, tmp_path / f"{MODULE}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    client = client_for(redis_url)
    p = Project(tmp_path, app_name, redis_url, client, layout_for(redis_url), module, [])
    try:
        yield p
    finally:
        for w in p.workers:
            if w.proc.poll() is None:
                w.stop(timeout=30)
            w.__exit__(None, None, None)
        for w in p.workers:
            print(f"--- worker {w.proc.pid} ---\n" + "\n".join(w.output.splitlines()[-60:]))
        client.close()
        sys.modules.pop(name, None)


def test_a_rate_limit_holds_across_three_worker_processes(project: Project) -> None:
    """50/s over three processes: every second of a backlog starts 45 to 55 jobs, by the
    start times the jobs recorded themselves, over 10 s of steady rate; none more than 55
    plus the burst a rate allows after a quiet spell (a tenth of its period)."""
    supervisor = project.start("--processes", "3", "--no-processors")
    project.wait_ready(3)
    ids = project.enqueue("paced", 700)  # 14 s of work at 50/s
    project.wait_succeeded(ids)
    starts = sorted(float(x) for x in project.client.lrange("starts", 0, -1))
    assert len(starts) == len(ids)  # each ran once: a start put off is not a try
    first = starts[0]
    per_second = [sum(1 for s in starts if first + k <= s < first + k + 1) for k in range(13)]
    print("starts per second:", per_second)
    assert all(n <= 55 + 1 for n in per_second), per_second
    # Seconds 0 and 1 hold that burst, and the first look at each job of the backlog (all
    # queued at once, each put off in its turn): seconds 2 to 11 are the steady rate.
    assert all(45 <= n <= 55 for n in per_second[2:12]), per_second
    assert supervisor.stop() == 0, supervisor.output


def test_a_concurrency_limit_holds_across_three_worker_processes(project: Project) -> None:
    """concurrency_limit=2 over three processes of 8 slots each: the jobs, counting
    themselves in and out, never see more than 2 running; every job runs once."""
    supervisor = project.start("--processes", "3", "--no-processors")
    project.wait_ready(3)
    ids = project.enqueue("capped", 120)
    project.wait_succeeded(ids)
    levels = [int(x) for x in project.client.lrange("levels", 0, -1)]
    assert len(levels) == len(ids)
    assert max(levels) == 2, levels  # reached, never passed
    assert int(project.client.get("running")) == 0
    assert supervisor.stop() == 0, supervisor.output


def test_a_killed_workers_slots_come_back_once_its_heartbeat_expires(project: Project) -> None:
    """Two gated jobs hold both slots; the worker running one is killed (SIGKILL). A third
    job starts only once that worker's heartbeat has expired, on a live worker; the job
    it was running runs again, and every job ends SUCCESS."""
    workers = [project.start("--no-processors") for _ in range(3)]
    project.wait_ready(3)
    ids = project.enqueue("gated", 5)

    def started() -> list[tuple[int, int]]:
        return [
            (int(n), int(pid))
            for n, pid in (x.decode().split(":") for x in project.client.lrange("gated", 0, -1))
        ]

    wait_for(lambda: len(started()) >= 2, HANG)
    assert len(started()) == 2  # both slots taken: the others wait
    victim_pid = started()[0][1]
    [victim] = [w for w in workers if w.proc.pid == victim_pid]
    [executor] = [e for e, info in project.executors().items() if info["pid"] == victim_pid]
    victim.kill()
    project.workers.remove(victim)  # dead on purpose
    victim.__exit__(None, None, None)
    held_by_victim = sum(1 for _, pid in started() if pid == victim_pid)
    wait_for(lambda: len(started()) >= 2 + held_by_victim, HANG)
    # A slot came back only once the killed worker's heartbeat had expired.
    assert not project.client.exists(project.layout.job_beat(project.app_name, executor))
    survivors = {w.proc.pid for w in workers if w is not victim}
    assert {pid for _, pid in started()[2:]} <= survivors
    project.client.set("gate", 1)
    project.wait_succeeded(ids)
    for w in workers:
        if w is not victim:
            assert w.stop() == 0, w.output


def test_jobs_show_says_why_a_job_waits(project: Project) -> None:
    """A job put off by its concurrency limit: `runnel jobs show` prints its status (SENT:
    its try was not counted) and the limit it waits for."""
    worker = project.start("--no-processors")
    project.wait_ready(1)
    ids = project.enqueue("gated", 3)
    wait_for(lambda: project.client.llen("gated") >= 2, HANG)
    ran = {f"gated-{x.decode().split(':')[0]}" for x in project.client.lrange("gated", 0, -1)}
    [waiting] = [i for i in ids if i not in ran]
    env = env_with(project.redis_url)

    def shown() -> str | None:
        done = cli("jobs", "show", f"{MODULE}:app", waiting, cwd=project.dir, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout if "status:    SENT" in done.stdout else None

    text = wait_for(shown, HANG)
    assert "tries:     0 of 4\n" in text, text
    assert "waiting:   put off by its concurrency_limit 2; starts again when due\n" in text
    assert "due:" in text, text
    as_json = cli("jobs", "show", f"{MODULE}:app", waiting, "--json", cwd=project.dir, env=env)
    report = json.loads(as_json.stdout)
    assert report["waiting"] in ("concurrency", None)  # None: taken again meanwhile
    project.client.set("gate", 1)
    project.wait_succeeded(ids)
    assert worker.stop() == 0, worker.output


MISTAKES = [
    ('rate_limit="fast"', "rate_limit 'fast' is not N/s, N/m or N/h"),
    ('rate_limit="10/fortnight"', "rate_limit '10/fortnight' is not N/s, N/m or N/h"),
    ('rate_limit="0/s"', "rate_limit '0/s': the count must be from 1 to 1000000"),
    ("concurrency_limit=0", "concurrency_limit must be an integer from 1 to 100000, not 0"),
    ('concurrency_limit="2"', "concurrency_limit must be an integer from 1 to 100000, not '2'"),
]


@pytest.mark.parametrize(("option", "says"), MISTAKES)
@pytest.mark.parametrize("command", ["send", "worker"])
def test_a_bad_limit_is_one_error_line_and_nothing_is_enqueued(
    tmp_path: Path, app_name: str, redis_url: str, option: str, says: str, command: str
) -> None:
    (tmp_path / "badlimits.py").write_text(
        textwrap.dedent(
            f"""
            from runnel import App

            app = App(name={app_name!r}, redis_url={redis_url!r})

            @app.job({option})
            async def work(n: int) -> None: ...
            """
        )
    )
    args = (
        ["jobs", "send", "badlimits:work", "[1]"]
        if command == "send"
        else ["worker", "badlimits:app", "--no-processors"]
    )
    done = cli(*args, cwd=tmp_path, env=env_with(redis_url), timeout=60)
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("Error:"), err
    assert f"job 'work': {says}" in err, err
    client = client_for(redis_url)
    try:
        layout = layout_for(redis_url)
        assert not client.exists(layout.job_queue(app_name)), "a job was enqueued"
        assert not client.exists(layout.job_schedule(app_name))
    finally:
        client.close()
