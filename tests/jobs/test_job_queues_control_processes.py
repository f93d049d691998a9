"""Cancels and periodic jobs with named queues, across real processes: `runnel worker
--queues ...` runs the jobs, `runnel jobs cancel|show|info` cancels and looks at them,
against a real redis-server.

The app (``ctlmod.py`` in ``tmp_path``, written by this module; the helpers are
tests/jobs/test_job_control.py's) has ``hold`` and ``mark`` in the queue "critical" and
``digest``, a periodic job of every second, in the queue "reports". Each job appends what
it does to ``ran.log`` (``start``, ``cancelled``, ``ran`` ... with its id, try and pid).

Only ``redis_url`` says where Redis is, so tests/redis_cluster/ runs these tests again on
a Redis Cluster. No assertion is made on how long anything took.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runnel.jobs import JobStatus
from tests.jobs.test_job_control import APP, HANG, MODULE, Project, ok, show, stop
from tests.support.processes import wait_for

APP_SOURCE = """
import asyncio
import os
from pathlib import Path
from typing import Any

from runnel import App
from runnel.jobs import current_job, report_progress

HERE = Path(__file__).parent

app = App(
    name=APP_NAME,
    default_grace_period=2,
    job_heartbeat_timeout=2,
    job_schedule_interval=0.05,
)


def note(what):
    job = current_job()
    with open(HERE / "ran.log", "a") as log:
        log.write(f"{what} {job.id} {job.tries} {os.getpid()}\\n")


@app.job(queue="critical", retries=2)
async def hold(gate: str) -> str:
    note("start")
    await report_progress(0.5, f"waiting for {gate}")
    try:
        while not (HERE / gate).exists():
            await asyncio.sleep(0.02)
    except asyncio.CancelledError:
        note("cancelled")
        raise
    note("end")
    return gate


@app.job(queue="critical")
async def mark(tag: str) -> str:
    note("ran")
    return tag


@app.job(cron="* * * * * *", queue="reports")
async def digest() -> None:
    note("ran")
"""


@pytest.fixture
def project(
    tmp_path: Path, app_name: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Project]:
    (tmp_path / f"{MODULE}.py").write_text(
        textwrap.dedent(APP_SOURCE).replace("APP_NAME", repr(app_name))
    )
    monkeypatch.setenv("RUNNEL_REDIS_URL", redis_url)
    name = f"{MODULE}_{app_name}"
    spec = importlib.util.spec_from_file_location(name, tmp_path / f"{MODULE}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    yield Project(tmp_path, app_name, redis_url, module)
    sys.modules.pop(name, None)


def info(project: Project) -> dict[str, Any]:
    """`runnel jobs info --json`."""
    return json.loads(ok(project.run("jobs", "info", APP, "--json")))


def test_a_queued_job_of_a_named_queue_cancelled_never_runs(project: Project) -> None:
    """Cancelled from the shell before any worker ran: its entry leaves the queue at once
    (`runnel jobs info` counts nothing queued in "critical"), and a worker taking that
    queue runs the job enqueued after it, not it."""
    doomed = project.delay("mark", "doomed")
    assert info(project)["queues"]["critical"]["queued"] == 1
    out = ok(project.run("jobs", "cancel", APP, doomed))
    assert out == f"cancelled job {doomed} (it was SENT)\n"
    counts = info(project)
    assert (counts["queues"]["critical"]["queued"], counts["cancelled"]) == (0, 1)
    after = project.delay("mark", "after")
    with project.worker("--queues", "critical") as worker:
        project.wait_did(after, "ran")
        stop(worker)
    assert project.did(doomed) == []
    assert show(project, doomed)["queue"] == "critical"
    assert project.status(doomed) == JobStatus.CANCELLED


def test_a_running_job_taken_through_queues_is_cancelled(project: Project) -> None:
    """A worker taking "critical" before the default queue runs ``hold``; `runnel jobs
    cancel` stops it there (CancelledError), no retry follows, and its slot runs the next
    job of the queue."""
    with project.worker("--queues", "critical,default", "--concurrency", "1") as worker:
        held = project.delay("hold", "gate-a")
        project.wait_did(held, "start")
        wait_for(lambda: "progress" in show(project, held), HANG)
        shown = show(project, held)
        assert (shown["queue"], shown["status"]) == ("critical", "EXECUTING")
        assert shown["progress"] == "50% waiting for gate-a"
        out = ok(project.run("jobs", "cancel", APP, held))
        assert out == f"cancelled job {held} (it was EXECUTING)\n"
        assert project.status(held) == JobStatus.CANCELLED  # at once
        project.wait_did(held, "cancelled")
        project.open("gate-a")
        after = project.delay("mark", "after")  # the one slot is free again
        project.wait_did(after, "ran")
        critical = info(project)["queues"]["critical"]
        assert (critical["queued"], critical["executing"]) == (0, 0)
        stop(worker)
    assert project.did(held) == ["start", "cancelled"]
    record = project.record(held)
    assert (record.status, record.tries, record.queue) == (JobStatus.CANCELLED, 1, "critical")
    assert f"job hold {held} was cancelled; stopping it" in worker.output


def test_a_periodic_job_with_a_queue_is_enqueued_in_that_queue(project: Project) -> None:
    """A worker that does not take "reports" settles ``digest``'s ticks all the same: their
    jobs wait in "reports" and it never runs them; a worker of "reports" does."""
    with project.worker("--queues", "critical,default") as settler:
        wait_for(lambda: info(project)["queues"]["reports"]["queued"] >= 2, HANG)
        report = info(project)
        [periodic] = report["periodic"]
        assert (periodic["name"], periodic["queue"]) == ("digest", "reports")
        last = periodic["last_job"]
        shown = show(project, last)
        assert (shown["queue"], shown["status"]) == ("reports", "SENT")
        assert report["queues"]["critical"]["queued"] == 0
        text = ok(project.run("jobs", "info", APP))
        assert "  digest  cron '* * * * * *' in UTC, missed: run_once, queue reports\n" in text
        assert project.did(last) == []
        with project.worker("--queues", "reports") as runner:
            wait_for(lambda: project.did(last) == ["ran"], HANG)
            stop(runner)
        stop(settler)
    runs = [x for x in project.lines() if x.id.startswith("digest@")]
    assert runs and {x.pid for x in runs} == {runner.proc.pid}
    assert project.record(last).queue == "reports"
