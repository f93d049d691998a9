"""Cancelling jobs and following their progress, across real processes: `runnel worker`
runs the jobs, `runnel jobs cancel|show` (or the Python API in the test process) cancels
and looks at them, against a real redis-server.

The app module (``ctlmod.py`` in ``tmp_path``, the workers' directory) has jobs that
append what they do to ``ran.log`` there (``start``, ``end``, ``cancelled``, ... with the
job's id and try), so a test reads back what ran, where and how far. ``hold`` (async) and
``hold_sync`` (a plain def) wait until a gate file exists: a test decides when a job may
end. That a job never runs is shown by a later job: ``mark`` jobs enqueued after it (or
due after it) have run, and it has not.

Only ``redis_url`` says where Redis is, so tests/redis_cluster/ runs these tests again on
a Redis Cluster. No assertion is made on how long anything took.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runnel.jobs import JobCancelled, JobRecord, JobStatus
from tests.support.processes import RUNNEL, WorkerProcess, cli, env_with, wait_for

MODULE = "ctlmod"
APP = f"{MODULE}:app"
HANG = 60
"""Hang guard (seconds) of every wait."""

APP_SOURCE = '''
import asyncio
import os
import time
from pathlib import Path

from runnel import App
from runnel.jobs import current_job, report_progress, report_progress_sync

HERE = Path(__file__).parent

app = App(
    name=APP_NAME,
    default_grace_period=2,
    job_heartbeat_timeout=2,
    job_backoff_base=1,
    job_backoff_cap=2,
)


def note(what):
    """One line of ran.log: what happened, to which job, in which try and process."""
    job = current_job()
    with open(HERE / "ran.log", "a") as log:
        log.write(f"{what} {job.id} {job.tries} {os.getpid()}\\n")


@app.job
async def mark(tag: str) -> str:
    note("ran")
    return tag


@app.job(retries=2)
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


@app.job(retries=2)
def hold_sync(gate: str) -> str:
    note("start")
    report_progress_sync(0.25, f"waiting for {gate}")
    while not (HERE / gate).exists():
        if current_job().cancelled:
            note("saw-cancel")
            return "stopped early"
        time.sleep(0.02)
    note("end")
    return gate


@app.job(retries=3)
async def flaky(gate: str) -> str:
    """Fails every try until its gate exists."""
    note("ran")
    if not (HERE / gate).exists():
        raise ValueError("not yet")
    return gate
'''


@dataclass(frozen=True)
class Line:
    what: str
    id: str
    tries: int
    pid: int


@dataclass
class Project:
    dir: Path
    app_name: str
    redis_url: str
    module: ModuleType

    @property
    def env(self) -> dict[str, str]:
        return env_with(self.redis_url)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return cli(*args, cwd=self.dir, env=self.env)

    def worker(self, *extra: str) -> WorkerProcess:
        return WorkerProcess(APP, self.dir, self.env, *extra)

    def call(self, make: Any) -> Any:
        """Run ``make(app)`` (a coroutine) with the app in this process."""
        app = self.module.app

        async def go() -> Any:
            try:
                return await make(app)
            finally:
                await app.aclose()

        return asyncio.run(go())

    def delay(self, job: str, *args: Any, **kwargs: Any) -> str:
        fn = getattr(self.module, job)
        return self.call(lambda app: fn.delay(*args, **kwargs)).id

    def record(self, job_id: str) -> JobRecord:
        found = self.call(lambda app: app.job_store.job(job_id))
        assert found is not None, f"job {job_id} is gone"
        return found

    def status(self, job_id: str) -> JobStatus:
        return self.record(job_id).status

    def lines(self) -> list[Line]:
        path = self.dir / "ran.log"
        if not path.exists():
            return []
        out = []
        for text in path.read_text().splitlines():
            what, job_id, tries, pid = text.split()
            out.append(Line(what, job_id, int(tries), int(pid)))
        return out

    def did(self, job_id: str) -> list[str]:
        """What ``job_id`` wrote to ran.log, in order."""
        return [x.what for x in self.lines() if x.id == job_id]

    def open(self, gate: str) -> None:
        (self.dir / gate).touch()

    def wait_did(self, job_id: str, what: str) -> None:
        wait_for(lambda: what in self.did(job_id), HANG)


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


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stderr == "", done.stderr
    return done.stdout


def one_error_line(done: subprocess.CompletedProcess[str], *names: str) -> str:
    """Non-zero exit, no traceback, one line on stderr starting "Error:" naming ``names``."""
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("Error:"), done.stderr
    for name in names:
        assert name in err, (name, err)
    return err


def stop(worker: WorkerProcess) -> None:
    code = worker.stop()
    assert code == 0, worker.output


def show(project: Project, job_id: str) -> dict[str, str]:
    """The ``key: value`` lines of `runnel jobs show`."""
    text = ok(project.run("jobs", "show", APP, job_id))
    return {m[1]: m[2] for m in re.finditer(r"^(\w+):\s+(.*)$", text, re.MULTILINE)}


# --- jobs that never ran ---------------------------------------------------------------


def test_a_queued_job_cancelled_never_runs(project: Project) -> None:
    """Cancelled while no worker runs; a job enqueued after it runs, it does not."""
    doomed = project.delay("mark", "doomed")
    out = ok(project.run("jobs", "cancel", APP, doomed))
    assert out == f"cancelled job {doomed} (it was SENT)\n"
    after = project.delay("mark", "after")
    with project.worker() as worker:
        project.wait_did(after, "ran")
        stop(worker)
    assert project.did(doomed) == []
    record = project.record(doomed)
    assert (record.status, record.tries, record.started) == (JobStatus.CANCELLED, 0, None)
    with pytest.raises(JobCancelled, match=doomed):
        project.call(lambda app: app.job_result(doomed).get(timeout=HANG))
    assert show(project, doomed)["status"] == "CANCELLED"


def test_a_scheduled_job_cancelled_never_runs(project: Project) -> None:
    """Due first (a countdown), cancelled before any worker could move it to the queue: a
    job due after it runs, it does not."""
    doomed = project.delay("mark", "doomed", countdown=1)
    after = project.delay("mark", "after", countdown=1.5)
    assert project.record(doomed).due is not None
    assert project.call(lambda app: app.job_result(doomed).cancel()) is True
    assert project.record(doomed).due is None
    with project.worker() as worker:
        project.wait_did(after, "ran")
        stop(worker)
    assert project.did(doomed) == []
    assert project.status(doomed) == JobStatus.CANCELLED
    counts = project.call(lambda app: app.job_store.counts(app.clock.now()))
    assert (counts.queued, counts.scheduled, counts.cancelled) == (0, 0, 1)


def test_a_job_waiting_for_its_retry_cancelled_is_not_retried(project: Project) -> None:
    """Failed once (RETRY, due within job_backoff_cap = 2 s); cancelled; a job due 3 s
    later runs, and the retry never came."""
    with project.worker() as worker:
        flaky = project.delay("flaky", "healed")
        wait_for(lambda: project.status(flaky) == JobStatus.RETRY, HANG)
        stop(worker)
    out = ok(project.run("jobs", "cancel", APP, flaky))
    assert out == f"cancelled job {flaky} (it was RETRY)\n"
    project.open("healed")  # a retry now would succeed
    with project.worker() as worker:
        after = project.delay("mark", "after", countdown=3)
        project.wait_did(after, "ran")
        stop(worker)
    assert project.did(flaky) == ["ran"]
    record = project.record(flaky)
    assert (record.status, record.tries) == (JobStatus.CANCELLED, 1)
    assert record.error is not None and record.error.message == "not yet"  # its one try


# --- running jobs -----------------------------------------------------------------------


def test_a_running_async_job_gets_cancelled_error_in_its_worker(project: Project) -> None:
    with project.worker() as worker:
        held = project.delay("hold", "gate-a")
        project.wait_did(held, "start")
        out = ok(project.run("jobs", "cancel", APP, held))
        assert out == f"cancelled job {held} (it was EXECUTING)\n"
        assert project.status(held) == JobStatus.CANCELLED  # at once, not when it stops
        project.wait_did(held, "cancelled")
        # Its gate opens: nothing of it is left to go on, and no retry comes.
        project.open("gate-a")
        after = project.delay("mark", "after")
        project.wait_did(after, "ran")
        stop(worker)
    assert project.did(held) == ["start", "cancelled"]
    record = project.record(held)
    assert (record.status, record.tries) == (JobStatus.CANCELLED, 1)
    assert f"job hold {held} was cancelled; stopping it" in worker.output
    assert "Traceback" not in worker.output


def test_a_running_sync_job_sees_its_flag_and_gives_its_slot_back(project: Project) -> None:
    """A plain def job in a worker with one slot: cancelled through the Python API (sync
    form), it sees current_job().cancelled and returns; what it returns is dropped, and
    the slot it held runs the next job."""
    with project.worker("--concurrency", "1") as worker:
        held = project.delay("hold_sync", "gate-s")
        project.wait_did(held, "start")
        after = project.delay("mark", "after")  # waits for the only slot
        handle = project.module.app.job_result(held).sync()
        assert handle.cancel() is True
        assert handle.cancel() is False  # ended already: nothing changes
        assert handle.status() == JobStatus.CANCELLED
        project.wait_did(held, "saw-cancel")
        project.wait_did(after, "ran")
        with pytest.raises(JobCancelled):
            handle.get(timeout=HANG)
        stop(worker)
    assert project.did(held) == ["start", "saw-cancel"]
    record = project.record(held)
    assert (record.status, record.tries, record.result) == (JobStatus.CANCELLED, 1, b"c")


def test_a_job_that_ended_is_not_cancelled(project: Project) -> None:
    with project.worker() as worker:
        done = project.delay("mark", "done")
        wait_for(lambda: project.status(done) == JobStatus.SUCCESS, HANG)
        stop(worker)
    failed = project.run("jobs", "cancel", APP, done)
    one_error_line(failed, done, "already ended (SUCCESS)", "not cancelled")
    assert failed.stdout == ""
    assert project.call(lambda app: app.job_result(done).cancel()) is False
    assert project.status(done) == JobStatus.SUCCESS
    assert project.call(lambda app: app.job_result(done).get(timeout=HANG)) == "done"
    again = project.delay("mark", "again")
    ok(project.run("jobs", "cancel", APP, again))
    one_error_line(project.run("jobs", "cancel", APP, again), "already ended (CANCELLED)")


def test_send_wait_on_a_job_cancelled_meanwhile_is_one_error_line(project: Project) -> None:
    """`runnel jobs send --wait` prints the id, then learns of the cancel while it waits."""
    with project.worker() as worker:
        send = ["jobs", "send", f"{MODULE}:hold", '["gate-w"]', "--job-id", "w1"]
        waiting = subprocess.Popen(
            [*RUNNEL, *send, "--wait", str(HANG)],
            cwd=project.dir,
            env=project.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            project.wait_did("w1", "start")
            ok(project.run("jobs", "cancel", APP, "w1"))
            out, err = waiting.communicate(timeout=HANG)
        finally:
            if waiting.poll() is None:
                waiting.kill()
        stop(worker)
    done = subprocess.CompletedProcess(waiting.args, waiting.returncode, out, err)
    one_error_line(done, "job 'w1' was cancelled")
    assert out == "w1\n"


# --- bad input --------------------------------------------------------------------------


def test_cancel_bad_input_is_one_error_line(project: Project) -> None:
    one_error_line(project.run("jobs", "cancel", APP, "no-such-job"), "no-such-job", "no job")
    one_error_line(project.run("jobs", "cancel", f"{MODULE}:nope", "x"), "nope")
    one_error_line(project.run("jobs", "cancel", f"{MODULE}:mark", "x"), "not an App")
    missing = project.run("jobs", "cancel", APP)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert "JOB_ID" in missing.stderr
    with pytest.raises(Exception, match="no job with id 'ghost'"):
        project.call(lambda app: app.job_result("ghost").cancel())


# --- progress ---------------------------------------------------------------------------


def test_progress_of_running_jobs_in_show_and_result(project: Project) -> None:
    with project.worker() as worker:
        held = project.delay("hold", "gate-p")
        synced = project.delay("hold_sync", "gate-q")
        project.wait_did(held, "start")
        project.wait_did(synced, "start")
        wait_for(lambda: project.record(held).progress and project.record(synced).progress)

        fields = show(project, held)
        assert fields["status"] == "EXECUTING"
        assert fields["progress"] == "50% waiting for gate-p"
        report = json.loads(ok(project.run("jobs", "show", APP, held, "--json")))
        assert report["progress"]["fraction"] == 0.5
        assert report["progress"]["message"] == "waiting for gate-p"
        assert report["progress"]["try"] == 1
        assert show(project, synced)["progress"] == "25% waiting for gate-q"
        progress = project.call(lambda app: app.job_result(synced).progress())
        assert (progress.fraction, progress.message) == (0.25, "waiting for gate-q")
        assert progress.tries == 1

        project.open("gate-p")
        project.open("gate-q")
        wait_for(lambda: project.status(held) == project.status(synced) == JobStatus.SUCCESS)
        stop(worker)
    # Kept after the job ended: the last report of its last try.
    assert show(project, held)["progress"] == "50% waiting for gate-p"
    queued = project.delay("mark", "never-run")
    assert "progress" not in show(project, queued)
    assert project.call(lambda app: app.job_result(queued).progress()) is None
    assert json.loads(ok(project.run("jobs", "show", APP, queued, "--json")))["progress"] is None
