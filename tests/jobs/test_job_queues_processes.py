"""Named queues and priorities with real `runnel worker` processes on a real redis-server.

The app (``queuesapp.py`` in ``tmp_path``) declares one job per queue: ``urgent`` in
"critical", ``normal`` in the default queue, ``batch`` in "bulk", and ``hold`` (bulk
too) which runs until the test sets its gate key. Every job RPUSHes ``{queue}:{n}`` to
the list ``runs`` as it starts, so the order in which a worker started them is read back
from Redis. Jobs are enqueued before the worker starts, so every queue has jobs ready
from its first take. Nothing is asserted on how long anything took.

Only ``redis_url`` says where Redis is: the test reads Redis through a client that also
speaks Redis Cluster and names keys by the key layout of that URL, so
tests/redis_cluster/ runs these tests again on a cluster.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runnel_redis.layout import KeyLayout, layout_for
from tests.support.metrics_scrape import scrape, total
from tests.support.ports import free_port
from tests.support.processes import WorkerProcess, cli, env_with, wait_for
from tests.support.worker_cluster import client_for

MODULE = "queuesapp"
TARGET = f"{MODULE}:app"
HANG = 120
"""Hang guard (seconds) of every wait; no assertion is made on how long anything took."""

APP_SOURCE = """
import asyncio

from runnel import App

app = App(name={app_name!r}, redis_url={redis_url!r}, default_grace_period=2,
          job_heartbeat_timeout=2, job_schedule_interval=0.05)


async def ran(what):
    await app.redis.rpush("runs", what)


@app.job(queue="critical")
async def urgent(n: int) -> None:
    await ran(f"critical:{{n}}")


@app.job
async def normal(n: int) -> None:
    await ran(f"default:{{n}}")


@app.job(queue="bulk")
async def batch(n: int) -> None:
    await ran(f"bulk:{{n}}")


@app.job(queue="bulk", retries=0)
async def doomed() -> None:
    raise ValueError("doomed on purpose")


@app.job(queue="bulk")
async def hold(gate: str) -> None:
    await ran(f"bulk:hold")
    while not await app.redis.exists("gate:" + gate):
        await asyncio.sleep(0.02)
"""


class Project:
    """The app directory; enqueueing through the public API, reading what the jobs did."""

    def __init__(self, directory: Path, app_name: str, redis_url: str) -> None:
        self.dir = directory
        self.app_name = app_name
        self.redis_url = redis_url
        self.client = client_for(redis_url)
        self.layout: KeyLayout = layout_for(redis_url)
        self.workers: list[WorkerProcess] = []
        self.stopped: list[WorkerProcess] = []
        name = f"{MODULE}_{app_name}"
        spec = importlib.util.spec_from_file_location(name, directory / f"{MODULE}.py")
        assert spec is not None and spec.loader is not None
        self.module: ModuleType = importlib.util.module_from_spec(spec)
        sys.modules[name] = self.module
        spec.loader.exec_module(self.module)

    def env(self, **extra: str) -> dict[str, str]:
        return env_with(self.redis_url, **extra)

    def worker(self, *args: str, **env: str) -> WorkerProcess:
        started = WorkerProcess(TARGET, self.dir, self.env(**env), *args)
        self.workers.append(started)
        return started

    def stop(self, worker: WorkerProcess) -> int:
        """SIGTERM and the exit code: a graceful stop."""
        self.stopped.append(worker)
        return worker.stop()

    def run(self, *args: str, **env: str) -> Any:
        return cli(*args, cwd=self.dir, env=self.env(**env))

    def enqueue(self, job: str, count: int, **options: Any) -> list[str]:
        """``count`` calls of ``job`` (argument 0 to count - 1), enqueued in that order."""
        app = self.module.app

        async def go() -> list[str]:
            try:
                fn = app.jobs[job]
                return [(await fn.delay(n, **options)).id for n in range(count)]
            finally:
                await app.aclose()

        return asyncio.run(go())

    def delay(self, job: str, *args: Any, **options: Any) -> str:
        app = self.module.app

        async def go() -> str:
            try:
                return (await app.jobs[job].delay(*args, **options)).id
            finally:
                await app.aclose()

        return asyncio.run(go())

    def runs(self) -> list[str]:
        return [x.decode() for x in self.client.lrange("runs", 0, -1)]

    def wait_runs(self, count: int) -> list[str]:
        def enough() -> list[str] | None:
            for w in self.workers:
                assert w.proc.poll() is None or w in self.stopped, w.output
            found = self.runs()
            return found if len(found) >= count else None

        return wait_for(enough, HANG)

    def info(self) -> dict[str, Any]:
        done = self.run("jobs", "info", TARGET, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def executors(self) -> int:
        return len(self.client.hkeys(self.layout.job_executors(self.app_name)))

    def status(self, job_id: str) -> bytes | None:
        return self.client.hget(self.layout.job(self.app_name, job_id), "status")


@pytest.fixture
def project(tmp_path: Path, app_name: str, redis_url: str) -> Iterator[Project]:
    (tmp_path / f"{MODULE}.py").write_text(
        APP_SOURCE.format(app_name=app_name, redis_url=redis_url)
    )
    made = Project(tmp_path, app_name, redis_url)
    yield made
    for w in made.workers:
        try:
            if w.proc.poll() is None:
                w.stop(30)
        finally:
            w.__exit__(None, None, None)
    made.client.close()


def kinds(runs: list[str]) -> list[str]:
    """The queue of each run, in order, runs of one queue in a row merged."""
    out: list[str] = []
    for run in runs:
        queue = run.split(":")[0]
        if not out or out[-1] != queue:
            out.append(queue)
    return out


def test_strict_priority_takes_a_later_queue_only_when_the_earlier_ones_are_empty(
    project: Project,
) -> None:
    """One slot, jobs queued in every queue (bulk first, critical last): every critical
    job starts before any default job, every default job before any bulk job, and each
    queue's jobs start in the order they were enqueued."""
    for job in ("batch", "normal", "urgent"):
        project.enqueue(job, 20)
    worker = project.worker("--queues", "critical,default,bulk", "--concurrency", "1")
    runs = project.wait_runs(60)
    assert kinds(runs) == ["critical", "default", "bulk"]
    for queue in ("critical", "default", "bulk"):
        assert [r for r in runs if r.startswith(queue)] == [f"{queue}:{n}" for n in range(20)]
    assert project.stop(worker) == 0
    assert "queues critical,default,bulk (strict priority)" in worker.output


def test_weighted_queues_share_the_jobs_started_by_their_weights(project: Project) -> None:
    """One slot, 5:3:1: while every queue has jobs ready, the jobs started follow the
    weights (loosely asserted); none waits for another queue to be empty."""
    for job in ("batch", "normal", "urgent"):
        project.enqueue(job, 90)
    worker = project.worker("--queues", "critical=5,default=3,bulk=1", "--concurrency", "1")
    runs = project.wait_runs(270)
    first = Counter(r.split(":")[0] for r in runs[:90])  # every queue still has jobs then
    assert 40 <= first["critical"] <= 60, first
    assert 20 <= first["default"] <= 40, first
    assert 5 <= first["bulk"] <= 15, first
    assert first["critical"] > first["default"] > first["bulk"]
    assert len(kinds(runs)) > 10  # interleaved, not one queue after the other
    assert project.stop(worker) == 0
    assert "queues critical=5,default=3,bulk=1 (weighted)" in worker.output


def test_a_worker_takes_only_its_queues_and_info_counts_per_queue(project: Project) -> None:
    critical = project.enqueue("urgent", 5)
    later = project.delay("urgent", 99, countdown=3600)
    project.enqueue("batch", 5)
    project.delay("doomed")
    project.delay("hold", "g1")
    worker = project.worker("--queues", "bulk", "--concurrency", "4")
    runs = project.wait_runs(6)  # the five batch jobs and hold

    def counted() -> dict[str, Any] | None:
        info = project.info()
        bulk = info["queues"]["bulk"]
        return info if (bulk["dead"], bulk["executing"], bulk["queued"]) == (1, 1, 0) else None

    info = wait_for(counted, HANG)
    assert sorted(runs) == sorted([f"bulk:{n}" for n in range(5)] + ["bulk:hold"])
    assert list(info["queues"]) == ["critical", "default", "bulk"]  # declaration order
    shown = {
        q: (c["queued"], c["executing"], c["scheduled"], c["dead"])
        for q, c in info["queues"].items()
    }
    assert shown == {"critical": (5, 0, 1, 0), "default": (0, 0, 0, 0), "bulk": (0, 1, 0, 1)}
    assert info["queues"]["critical"]["next_due"] is not None
    assert (info["queued"], info["executing"], info["scheduled"], info["dead"]) == (5, 1, 1, 1)
    [executor] = info["executors"]
    assert executor["queues"] == "bulk"
    text = project.run("jobs", "info", TARGET).stdout
    assert "queues:" in text and "queues bulk" in text
    row = next(line.split() for line in text.splitlines() if line.startswith("  critical"))
    assert row == ["critical", "5", "0", "1", "0"]
    shown_job = project.run("jobs", "show", TARGET, critical[0], "--json")
    assert json.loads(shown_job.stdout)["queue"] == "critical"
    assert "queue:     critical" in project.run("jobs", "show", TARGET, critical[0]).stdout
    # The critical jobs are still waiting: a bulk worker never takes one.
    project.client.set("gate:g1", 1)
    assert project.stop(worker) == 0
    assert not [r for r in project.runs() if r.startswith("critical")]
    assert project.status(critical[0]) == b"SENT"
    # A worker of the critical queue runs them (the scheduled one stays scheduled).
    other = project.worker("--queues", "critical")
    runs = project.wait_runs(11)
    assert sorted(r for r in runs if r.startswith("critical")) == sorted(
        f"critical:{n}" for n in range(5)
    )
    assert project.stop(other) == 0
    assert project.status(later) == b"SENT"


def test_without_queues_a_worker_takes_every_declared_queue(project: Project) -> None:
    """Equal shares; and the default queue's keys are those of Runnel before queues: a
    job stored there as an older version stored it (no queue in its record) runs too."""
    for job in ("batch", "normal", "urgent"):
        project.enqueue(job, 3)
    old = project.layout.job(project.app_name, "from-before")
    project.client.hset(
        old,
        mapping={
            "name": "normal",
            "status": "SENT",
            "payload": b'{"args":[3]}',
            "codec": "json",
            "retries": 3,
            "results": 1,
            "tries": 0,
            "created": 1,
        },
    )
    project.client.xadd(project.layout.job_queue(project.app_name), {"id": "from-before"})
    worker = project.worker("--concurrency", "1")
    runs = project.wait_runs(10)
    assert Counter(r.split(":")[0] for r in runs) == {"critical": 3, "default": 4, "bulk": 3}
    assert "default:3" in runs
    wait_for(lambda: project.status("from-before") == b"SUCCESS", HANG)
    assert project.stop(worker) == 0
    assert "queues critical=1,default=1,bulk=1 (weighted)" in worker.output


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ("critical,nosuch", "unknown queue(s): nosuch (app {app} has: bulk, critical, default)"),
        ("critical=0,bulk=1", "the weight of queue 'critical' must be a whole number from 1 "),
        ("critical=x,bulk=1", "the weight of queue 'critical' must be a whole number from 1 "),
        ("critical=2,bulk", "give every queue a weight or none, not 'critical=2,bulk'"),
        ("bulk,bulk", "queue 'bulk' is given twice in 'bulk,bulk'"),
        ("critical,,bulk", "queues are names separated by commas"),
        ("crit ical", "a queue name is 1 to 100 letters, digits, '_' or '-'"),
    ],
)
def test_a_bad_queue_selection_is_one_error_line_and_starts_nothing(
    project: Project, given: str, error: str
) -> None:
    for extra in ([], ["--processes", "2"]):
        done = project.run("worker", TARGET, "--queues", given, *extra)
        assert done.returncode == 1, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("Error: --queues: " + error.format(app=project.app_name))
        assert done.stdout == ""
    assert project.executors() == 0


def test_the_job_queues_setting_is_checked_like_the_option(project: Project) -> None:
    done = project.run("worker", TARGET, RUNNEL_JOB_QUEUES="critical,nosuch")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"Error: the job_queues setting: unknown queue(s): nosuch "
        f"(app {project.app_name} has: bulk, critical, default)"
    )
    assert project.executors() == 0
    project.enqueue("batch", 2)
    project.enqueue("urgent", 2)
    worker = project.worker("--concurrency", "1", RUNNEL_JOB_QUEUES="bulk")
    assert sorted(project.wait_runs(2)) == ["bulk:0", "bulk:1"]
    assert project.stop(worker) == 0
    assert not [r for r in project.runs() if r.startswith("critical")]


def test_job_metrics_carry_the_queue(project: Project) -> None:
    project.enqueue("urgent", 3)
    project.enqueue("batch", 2)
    port = free_port()
    worker = project.worker("--queues", "critical", "--metrics-port", str(port))
    project.wait_runs(3)

    def sampled() -> Any:
        samples = scrape(port)
        done = total(samples, "runnel_jobs_succeeded_total", queue="critical", job="urgent")
        bulk = total(samples, "runnel_jobs_queued", queue="bulk", app=project.app_name)
        critical = total(samples, "runnel_jobs_queued", queue="critical")
        return samples if (done, bulk, critical) == (3, 2, 0) else None

    samples = wait_for(sampled, HANG)  # the gauges are sampled every few seconds
    assert total(samples, "runnel_jobs_started_total", queue="critical") == 3
    assert total(samples, "runnel_jobs_dead_letters", queue="bulk") == 0
    assert project.stop(worker) == 0
