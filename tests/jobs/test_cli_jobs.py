"""The job queue on the command line: `runnel jobs send|info|show|dead ...` and `runnel worker`
running jobs, against the real `python -m runnel` and a real redis-server.

The app module (``jobmod.py`` in ``tmp_path``) declares two apps: ``app``, which has jobs
only (no streams), and ``mixed``, which has a stream processor and a job. Every job
RPUSHes what it did to a Redis list with a plain redis client, so a test reads back what
ran. Setup that is not under test (enqueueing jobs, sending events) goes through the
public Python API in the test process, which costs no interpreter start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import re
import signal
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis

from runnel.runtime.worker import Worker
from tests.support.processes import WorkerProcess, cli, cli_on_terminal, env_with, wait_for

MODULE = "jobmod"
APP = f"{MODULE}:app"
MIXED = f"{MODULE}:mixed"
JOB_ID = re.compile(r"^[0-9a-f]{32}$")
UNREACHABLE = "redis://127.0.0.1:1"
JOB_NAMES = ["add", "crash", "fail", "gated", "greet", "shout"]

APP_SOURCE = '''
import json
import os

import redis

from runnel import App, Record
from runnel.jobs import current_job

NAME = APP_NAME
FAST = dict(
    default_grace_period=5,  # only ever waited for when a test leaves a job blocked
    default_read_timeout=100,
    job_heartbeat_timeout=2,
    job_backoff_base=0.01,
    job_backoff_cap=0.05,
)

app = App(name=NAME, **FAST)  # jobs only, no streams
mixed = App(name=NAME + "m", **FAST)  # a stream processor and a job

_client = None


def client():
    global _client
    if _client is None:
        # No socket timeout (redis-py's default is 5 s): gated jobs block in BLPOP.
        _client = redis.Redis.from_url(os.environ["TEST_RECORD_URL"], socket_timeout=None)
    return _client


def record(key, **values):
    client().rpush(key, json.dumps(values))


@app.job(name="shout")
async def louder(text: str) -> str:
    return text.upper()


@app.job
async def add(a: int, b: int = 0) -> int:
    record("ran:add", id=current_job().id, a=a, b=b)
    return a + b


@app.job
async def greet(name: str, punctuation: str = "!") -> dict[str, str]:
    record("ran:greet", id=current_job().id)
    return {"greeting": f"hello {name}{punctuation}"}


@app.job(retries=1)
async def fail(message: str) -> str:
    """Fails every try, until the test sets the key "healed"."""
    job = current_job()
    record("ran:fail", id=job.id, tries=job.tries)
    if not client().exists("healed"):
        raise ValueError(f"failing on purpose: {message}")
    return f"healed {message}"


@app.job(retries=0)
def crash(code: int) -> int:
    """A plain function (run in a thread) that fails its only try, until "healed" is set."""
    record("ran:crash", id=current_job().id)
    if not client().exists("healed"):
        raise RuntimeError(f"crashed with code {code}")
    return code


@app.job(retries=0)
def gated(tag: str) -> str:
    """Counts itself running, then blocks until the test pushes a token onto "gate"."""
    r = client()
    running = r.incr("running")
    record("started", tag=tag, running=running)
    try:
        if r.blpop(["gate"], timeout=60) is None:
            raise TimeoutError("no token on the list 'gate' within 60s")
    finally:
        r.decr("running")
    r.rpush("finished", tag)
    return tag


def plain(x):
    return x


class Ping(Record):
    key: str
    n: int


pings = mixed.stream("pings", record=Ping, partition_by="key", partition_count=1)


@mixed.processor(pings)
async def seen(events):
    async for ping in events.records():
        client().rpush("seen", f"{ping.key}:{ping.n}")


@mixed.job
async def mark(tag: str) -> str:
    record("ran:mark", id=current_job().id, tag=tag)
    return tag
'''


@dataclass
class JobsProject:
    """The directory holding ``jobmod.py``; how to run `runnel` there and read Redis."""

    dir: Path
    app_name: str
    redis_url: str
    client: redis.Redis
    _module: ModuleType | None = field(default=None, repr=False)

    @property
    def env(self) -> dict[str, str]:
        return env_with(self.redis_url, TEST_RECORD_URL=self.redis_url)

    def run(
        self, *args: str, input: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return cli(*args, cwd=self.dir, env=env or self.env, input=input)

    def on_terminal(self, *args: str, answer: str) -> tuple[int, str, str]:
        return cli_on_terminal(*args, cwd=self.dir, env=self.env, answer=answer)

    @contextlib.contextmanager
    def worker(self, *extra: str, target: str = APP) -> Iterator[WorkerProcess]:
        """`runnel worker TARGET *extra` while the block runs (killed if still running);
        its output is printed if the block fails, to show what the worker saw."""
        with WorkerProcess(target, self.dir, self.env, *extra) as worker:
            try:
                yield worker
            except BaseException:
                print(f"--- output of runnel worker {target} {' '.join(extra)}:")
                print(worker.output)
                raise

    # What Redis holds, read with the plain client.

    def key(self, suffix: str, mixed: bool = False) -> str:
        return f"__jobs:{self.app_name}{'m' if mixed else ''}.{suffix}"

    def job(self, job_id: str, mixed: bool = False) -> dict[str, str]:
        raw = self.client.hgetall(self.key(f"job.{job_id}", mixed))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def status(self, job_id: str, mixed: bool = False) -> str | None:
        return self.job(job_id, mixed).get("status")

    def queued_ids(self, mixed: bool = False) -> list[str]:
        """The job ids in the queue stream (queued or executing), oldest first."""
        entries = self.client.xrange(self.key("queue", mixed))
        return [fields[b"id"].decode() for _, fields in entries]

    def scheduled(self) -> dict[str, float]:
        return {
            k.decode(): v
            for k, v in self.client.zrange(self.key("schedule"), 0, -1, withscores=True)
        }

    def dead_ids(self) -> list[str]:
        return [f[b"id"].decode() for _, f in self.client.xrange(self.key("dead"))]

    def has_result(self, job_id: str) -> bool:
        return bool(self.client.exists(self.key(f"result.{job_id}")))

    def records(self, key: str) -> list[dict[str, Any]]:
        """What the jobs RPUSHed to ``key`` (JSON objects)."""
        return [json.loads(x) for x in self.client.lrange(key, 0, -1)]

    def strings(self, key: str) -> list[str]:
        return [x.decode() for x in self.client.lrange(key, 0, -1)]

    def release(self, count: int = 1) -> None:
        """Let ``count`` blocked ``gated`` jobs finish."""
        self.client.rpush("gate", *["go"] * count)

    def partition(self) -> str:
        return f"__strm:{self.app_name}m.pings.0"

    # Setup through the public Python API, in this process.

    def module(self) -> ModuleType:
        if self._module is None:
            spec = importlib.util.spec_from_file_location(
                f"{MODULE}_{self.app_name}", self.dir / f"{MODULE}.py"
            )
            assert spec is not None and spec.loader is not None
            self._module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(self._module)
        return self._module

    def delay(self, job: str, *args: Any, **kwargs: Any) -> str:
        """``await jobmod.<job>.delay(*args, **kwargs)``; the job's id."""
        fn = getattr(self.module(), job)

        async def go() -> str:
            try:
                return (await fn.delay(*args, **kwargs)).id
            finally:
                await fn.app.aclose()

        return asyncio.run(go())

    def work_until(self, check: Callable[[], Any]) -> None:
        """Run a worker of ``app`` in this process until ``check()`` holds (setup only: the
        tests of `runnel worker` run the real command)."""
        the_app = self.module().app

        async def go() -> None:
            worker = Worker(the_app)
            task = asyncio.create_task(worker.run())
            try:
                async with asyncio.timeout(30):  # a hang guard
                    while not check():
                        assert not task.done(), "the worker stopped early"
                        await asyncio.sleep(0.05)
            finally:
                worker.stop()
                async with asyncio.timeout(30):
                    code = await task
            assert code == 0

        asyncio.run(go())

    def send_ping(self, key: str, n: int) -> None:
        module = self.module()

        async def go() -> None:
            try:
                await module.pings.send(module.Ping(key=key, n=n))
            finally:
                await module.mixed.aclose()

        asyncio.run(go())


@pytest.fixture
def project(
    tmp_path: Path,
    app_name: str,
    redis_url: str,
    redis_client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> JobsProject:
    (tmp_path / f"{MODULE}.py").write_text(
        textwrap.dedent(APP_SOURCE).replace("APP_NAME", repr(app_name))
    )
    # The apps loaded in this process (setup) take the URL from the environment, as the
    # `runnel` subprocesses do.
    monkeypatch.setenv("RUNNEL_REDIS_URL", redis_url)
    monkeypatch.setenv("TEST_RECORD_URL", redis_url)
    return JobsProject(dir=tmp_path, app_name=app_name, redis_url=redis_url, client=redis_client)


def assert_one_error_line(done: subprocess.CompletedProcess[str], *names: str) -> str:
    """Non-zero exit, no traceback, one line on stderr starting "Error:" naming ``names``."""
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1, f"not exactly one line on stderr:\n{done.stderr}"
    assert err.startswith("Error:"), err
    for name in names:
        assert name in err, f"{name!r} not named in: {err}"
    return err


def assert_ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def assert_nothing_enqueued(project: JobsProject) -> None:
    assert not project.client.exists(project.key("queue")), project.queued_ids()
    assert not project.client.exists(project.key("schedule")), project.scheduled()
    assert list(project.client.scan_iter()) == []


def show_fields(text: str) -> dict[str, str]:
    """The ``key: value`` lines of `runnel jobs show` (not the traceback lines)."""
    keys = "id|name|status|tries|created|due|started|finished|executor|args|kwargs|error|result"
    return {m[1]: m[2] for m in re.finditer(rf"^({keys}):\s+(.*)$", text, re.MULTILINE)}


def stopped(worker: WorkerProcess) -> int:
    """Stop a worker gracefully (SIGTERM); fail unless it exits 0."""
    code = worker.stop()
    assert code == 0, worker.output
    return code


# --- jobs send: enqueueing ---------------------------------------------------------------


def test_send_prints_the_id_and_enqueues_one_job(project: JobsProject) -> None:
    out = assert_ok(
        project.run("jobs", "send", f"{MODULE}:greet", '["ann"]', '{"punctuation": "?"}')
    )
    job_id = out.strip()
    assert JOB_ID.match(job_id), out
    assert project.queued_ids() == [job_id]
    assert not project.client.exists(project.key("schedule"))
    job = project.job(job_id)
    assert job["name"] == "greet"
    assert job["status"] == "SENT"
    assert (job["tries"], job["retries"], job["codec"]) == ("0", "3", "json")
    assert json.loads(job["payload"]) == {"args": ["ann"], "kwargs": {"punctuation": "?"}}


def test_send_finds_a_job_by_its_declared_name(project: JobsProject) -> None:
    """MODULE:NAME is the module's attribute, or else the name a job was declared under
    (@app.job(name="shout") on a function called louder)."""
    for target in (f"{MODULE}:louder", f"{MODULE}:shout"):
        job_id = assert_ok(project.run("jobs", "send", target, '["hi"]')).strip()
        assert project.job(job_id)["name"] == "shout"
    assert len(project.queued_ids()) == 2


def test_send_countdown_puts_the_job_on_the_schedule(project: JobsProject) -> None:
    out = assert_ok(project.run("jobs", "send", f"{MODULE}:add", "[1, 2]", "--countdown", "3600"))
    job_id = out.strip()
    job = project.job(job_id)
    assert job["status"] == "SENT"
    assert json.loads(job["payload"]) == {"args": [1, 2]}  # no KWARGS_JSON, none stored
    assert project.queued_ids() == []
    schedule = project.scheduled()
    assert list(schedule) == [job_id]
    # Due one hour after it was created (both in ms, from the same clock reading).
    assert int(job["due"]) == int(schedule[job_id])
    assert abs(int(job["due"]) - int(job["created"]) - 3_600_000) <= 1  # both in whole ms


def test_send_job_id_enqueues_once(project: JobsProject) -> None:
    first = project.run("jobs", "send", f"{MODULE}:add", "[1, 2]", "--job-id", "order-42")
    assert assert_ok(first).strip() == "order-42"
    assert first.stderr == ""
    again = project.run("jobs", "send", f"{MODULE}:add", "[3, 4]", "--job-id", "order-42")
    # Sending an id that exists is not a failure (it is how one enqueues exactly once),
    # but it says so.
    assert assert_ok(again).strip() == "order-42"
    assert "order-42" in again.stderr
    assert "exists already" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    assert project.queued_ids() == ["order-42"]
    assert json.loads(project.job("order-42")["payload"]) == {"args": [1, 2]}


def test_send_wait_without_a_worker_times_out_and_leaves_the_job_queued(
    project: JobsProject,
) -> None:
    done = project.run("jobs", "send", f"{MODULE}:add", "[1]", "--wait", "0.2")
    job_id = done.stdout.strip()
    assert JOB_ID.match(job_id), done.stdout  # printed first, so it can be followed up
    assert_one_error_line(done, job_id, "did not finish")
    assert project.queued_ids() == [job_id]
    assert project.status(job_id) == "SENT"


# --- jobs send: bad input ------------------------------------------------------------------

ADD = f"{MODULE}:add"

BAD_SENDS = {
    # command line after `jobs send`, what the error must name
    "args-malformed-json": ([ADD, "[1,"], ["ARGS_JSON", "malformed JSON"]),
    "args-object": ([ADD, '{"a": 1}'], ["ARGS_JSON", "array", "object"]),
    "args-number": ([ADD, "7"], ["ARGS_JSON", "array", "number"]),
    "args-null": ([ADD, "null"], ["ARGS_JSON", "array", "null"]),
    "kwargs-malformed-json": ([ADD, "[1]", '{"b": '], ["KWARGS_JSON", "malformed JSON"]),
    "kwargs-array": ([ADD, "[1]", "[2]"], ["KWARGS_JSON", "object", "array"]),
    "too-many-arguments": ([ADD, "[1, 2, 3]"], ["'add'", "too many"]),
    "missing-argument": ([ADD, "[]"], ["'add'", "'a'", "missing"]),
    "unexpected-keyword": ([ADD, "[1]", '{"c": 3}'], ["'add'", "'c'"]),
    "string-for-int": ([ADD, '["seven"]'], ["'add'", "'a'", "integer"]),
    "unknown-module": (["nosuchmod:add", "[1]"], ["nosuchmod"]),
    "unknown-attribute": ([f"{MODULE}:nosuch", "[1]"], [MODULE, "nosuch"]),
    "target-is-an-app": ([APP, "[1]"], [APP, "App", "not a job"]),
    "target-is-a-function": ([f"{MODULE}:plain", "[1]"], [f"{MODULE}:plain", "not a job"]),
    "negative-countdown": ([ADD, "[1]", "--countdown", "-1"], ["--countdown"]),
    "empty-job-id": ([ADD, "[1]", "--job-id", ""], ["--job-id", "1 to 200"]),
    "countdown-infinite": ([ADD, "[1]", "--countdown", "inf"], ["--countdown"]),
    "countdown-nan": ([ADD, "[1]", "--countdown", "nan"], ["--countdown"]),
    "negative-wait": ([ADD, "[1]", "--wait", "-1"], ["--wait"]),
    "args-with-a-newline": ([ADD, '{\n"a": 1}'], ["ARGS_JSON", "array", "object"]),
    "args-nan": ([ADD, "[NaN]"], ["ARGS_JSON", "malformed JSON", "JSON has no NaN"]),
    "kwargs-infinity": ([ADD, "[1]", '{"b": Infinity}'], ["KWARGS_JSON", "no NaN or Infinity"]),
}


@pytest.mark.parametrize("args,names", BAD_SENDS.values(), ids=BAD_SENDS.keys())
def test_send_bad_input(project: JobsProject, args: list[str], names: list[str]) -> None:
    done = project.run("jobs", "send", *args)
    assert_one_error_line(done, *names)
    assert done.stdout == ""
    assert_nothing_enqueued(project)


def test_send_countdown_beyond_the_calendar(project: JobsProject) -> None:
    """Either `jobs send` refuses a countdown past what a date can show, or `jobs info` and
    `jobs show` can show it."""
    done = project.run("jobs", "send", ADD, "[1]", "--countdown", "1e12")
    if done.returncode != 0:
        assert_one_error_line(done, "--countdown")
        assert_nothing_enqueued(project)
        return
    job_id = done.stdout.strip()
    assert_ok(project.run("jobs", "info", APP))
    assert_ok(project.run("jobs", "show", APP, job_id))


USAGE_ERRORS = {
    "no-target": [],
    "extra-argument": [ADD, "[1]", "{}", "[2]"],
}


@pytest.mark.parametrize("args", USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys())
def test_send_usage_errors(project: JobsProject, args: list[str]) -> None:
    """Mistakes click catches: its usage message (exit 2), no traceback, nothing enqueued."""
    done = project.run("jobs", "send", *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("Error:"), done.stderr
    assert_nothing_enqueued(project)


UNREACHABLE_COMMANDS = {
    "send": ["jobs", "send", ADD, "[1]"],
    "info": ["jobs", "info", APP],
}


@pytest.mark.parametrize("args", UNREACHABLE_COMMANDS.values(), ids=UNREACHABLE_COMMANDS.keys())
def test_unreachable_redis(project: JobsProject, args: list[str]) -> None:
    done = project.run(*args, env={**project.env, "RUNNEL_REDIS_URL": UNREACHABLE})
    assert_one_error_line(done, "127.0.0.1:1")
    assert done.stdout == ""


BAD_APP_TARGETS = {
    "info-given-a-job": (["jobs", "info", ADD], [ADD, "not an App"]),
    "show-unknown-module": (["jobs", "show", "nosuchmod:app", "x"], ["nosuchmod"]),
}


@pytest.mark.parametrize("args,names", BAD_APP_TARGETS.values(), ids=BAD_APP_TARGETS.keys())
def test_bad_app_target(project: JobsProject, args: list[str], names: list[str]) -> None:
    assert_one_error_line(project.run(*args), *names)


# --- send --wait, and jobs show, with a worker ---------------------------------------------


def test_wait_prints_the_result_and_show_describes_the_job(project: JobsProject) -> None:
    """A worker of an app that has only jobs runs one; `send --wait` prints its id and its
    result as JSON; `jobs show` (text and --json) tells everything kept of it."""
    with project.worker() as worker:
        done = project.run(
            "jobs", "send", f"{MODULE}:greet", '["ann"]', '{"punctuation": "?"}',
            "--job-id", "hello-1", "--wait", "60",
        )  # fmt: skip
        stopped(worker)
    job_id, result = assert_ok(done).splitlines()
    assert job_id == "hello-1"
    assert json.loads(result) == {"greeting": "hello ann?"}
    assert [r["id"] for r in project.records("ran:greet")] == ["hello-1"]
    assert "processors=-" in worker.output

    text = assert_ok(project.run("jobs", "show", APP, "hello-1"))
    shown = show_fields(text)
    assert shown["id"] == "hello-1"
    assert shown["name"] == "greet"
    assert shown["status"] == "SUCCESS"
    assert shown["tries"] == "1 of 4"
    assert json.loads(shown["args"]) == ["ann"]
    assert json.loads(shown["kwargs"]) == {"punctuation": "?"}
    assert json.loads(shown["result"]) == {"greeting": "hello ann?"}
    for stamp in ("created", "started", "finished"):
        assert stamp in shown, text
    assert "error" not in shown
    assert "Traceback" not in text

    report = json.loads(assert_ok(project.run("jobs", "show", APP, "hello-1", "--json")))
    assert report["id"] == "hello-1"
    assert (report["name"], report["status"]) == ("greet", "SUCCESS")
    assert (report["tries"], report["retries"]) == (1, 3)
    assert report["args"] == ["ann"]
    assert report["kwargs"] == {"punctuation": "?"}
    assert report["result"] == {"greeting": "hello ann?"}
    assert report["error"] is None
    assert report["executor"]
    created, started, finished = (
        datetime.fromisoformat(report[k]) for k in ("created", "started", "finished")
    )
    assert created <= started <= finished


def test_integers_beyond_64_bits_reach_the_job_and_come_back_exact(project: JobsProject) -> None:
    """Before, ARGS_JSON was read with orjson, which made a float of 2**64 + 1, and the
    job got 2**64; the printed result came from orjson too, which cannot write it."""
    with project.worker() as worker:
        done = project.run(
            "jobs", "send", f"{MODULE}:add", "[18446744073709551617]", '{"b": 1}',
            "--wait", "60",
        )  # fmt: skip
        stopped(worker)
    _, result = assert_ok(done).splitlines()
    assert json.loads(result) == 18446744073709551618


def test_wait_on_a_job_that_dies_and_show_its_error(project: JobsProject) -> None:
    """`send --wait` on a job that ends DEAD: its id on stdout, one Error line naming the
    failure, non-zero exit; `jobs show` has the error with its traceback."""
    with project.worker() as worker:
        done = project.run(
            "jobs", "send", f"{MODULE}:fail", '["x"]', "--job-id", "doomed", "--wait", "60"
        )
        stopped(worker)
    assert done.stdout.strip() == "doomed"
    assert_one_error_line(done, "doomed", "ValueError", "failing on purpose: x")
    assert [r["tries"] for r in project.records("ran:fail")] == [1, 2]

    text = assert_ok(project.run("jobs", "show", APP, "doomed"))
    shown = show_fields(text)
    assert (shown["name"], shown["status"], shown["tries"]) == ("fail", "DEAD", "2 of 2")
    assert json.loads(shown["args"]) == ["x"]
    assert shown["error"] == "ValueError: failing on purpose: x"
    assert "Traceback (most recent call last)" in text
    assert 'raise ValueError(f"failing on purpose: {message}")' in text
    assert "result" not in shown

    report = json.loads(assert_ok(project.run("jobs", "show", APP, "doomed", "--json")))
    assert (report["status"], report["tries"], report["retries"]) == ("DEAD", 2, 1)
    assert report["error"]["type"] == "ValueError"
    assert report["error"]["message"] == "failing on purpose: x"
    assert f"{MODULE}.py" in report["error"]["traceback"]
    assert "ValueError: failing on purpose: x" in report["error"]["traceback"]
    assert "result" not in report


def test_show_a_job_waiting_for_its_countdown_and_an_unknown_id(project: JobsProject) -> None:
    job_id = project.delay("add", 1, b=2, countdown=3600)
    shown = show_fields(assert_ok(project.run("jobs", "show", APP, job_id)))
    assert (shown["id"], shown["name"], shown["status"]) == (job_id, "add", "SENT")
    assert shown["tries"] == "0 of 4"
    assert json.loads(shown["args"]) == [1]
    assert json.loads(shown["kwargs"]) == {"b": 2}
    assert "started" not in shown
    due = datetime.fromisoformat(shown["due"]) - datetime.fromisoformat(shown["created"])
    assert abs(due.total_seconds() - 3600) <= 0.001  # both stored in whole ms

    done = project.run("jobs", "show", APP, "nosuchid")
    assert_one_error_line(done, "'nosuchid'", project.app_name)
    assert done.stdout == ""


# --- jobs info -----------------------------------------------------------------------------


def test_info_counts_and_executors(project: JobsProject) -> None:
    """Counts of every kind, the declared jobs, and the running worker's executor, alive;
    after a graceful stop the executor is gone."""
    with project.worker("--concurrency", "1") as worker:
        project.delay("add", 1, 2, job_id="ok")
        project.delay("fail", "x", job_id="dead")
        project.delay("add", 3, job_id="later", countdown=3600)
        wait_for(lambda: project.status("ok") == "SUCCESS" and project.dead_ids() == ["dead"])
        project.delay("gated", "g1", job_id="g1")
        project.delay("gated", "g2", job_id="g2")
        wait_for(lambda: project.records("started"))  # g1 holds the only slot; g2 waits

        report = json.loads(assert_ok(project.run("jobs", "info", APP, "--json")))
        text = assert_ok(project.run("jobs", "info", APP))
        project.release(2)
        wait_for(lambda: len(project.strings("finished")) == 2)
        stopped(worker)

    assert report["app"] == project.app_name
    assert report["jobs"] == JOB_NAMES
    counts = {k: report[k] for k in ("queued", "executing", "scheduled", "dead", "results")}
    assert counts == {"queued": 1, "executing": 1, "scheduled": 1, "dead": 1, "results": 1}
    assert report["next_due"] is not None
    [executor] = report["executors"]
    assert executor["alive"] is True
    assert executor["pid"] == worker.proc.pid
    assert executor["concurrency"] == 1

    assert f"jobs: {', '.join(JOB_NAMES)}" in text
    for name, count in counts.items():
        assert re.search(rf"^\s+{name}\s+{count}\b", text, re.MULTILINE), (name, text)
    assert re.search(r"scheduled\s+1\s+\(next due in \d", text), text
    assert "executors: 1 alive" in text
    assert re.search(rf"{re.escape(executor['id'])} .*pid {worker.proc.pid}\s+alive\b", text)

    after = json.loads(assert_ok(project.run("jobs", "info", APP, "--json")))
    assert after["executors"] == []
    assert (after["queued"], after["executing"], after["scheduled"]) == (0, 0, 1)
    assert (after["dead"], after["results"]) == (1, 3)


def test_info_shows_a_killed_worker_as_not_beating(project: JobsProject) -> None:
    with project.worker() as worker:
        wait_for(lambda: project.client.hlen(project.key("executors")) == 1)
        worker.kill()
    # Its heartbeat key expires after job_heartbeat_timeout (2 s, a real Redis TTL).
    wait_for(lambda: not project.client.keys(project.key("beat.*")))

    report = json.loads(assert_ok(project.run("jobs", "info", APP, "--json")))
    [executor] = report["executors"]
    assert executor["alive"] is False
    assert executor["pid"] == worker.proc.pid
    text = assert_ok(project.run("jobs", "info", APP))
    assert "executors: 0 alive, 1 not beating" in text
    assert "NOT BEATING" in text


# --- jobs dead list | replay | purge -------------------------------------------------------


@pytest.fixture
def dead(project: JobsProject) -> JobsProject:
    """Three dead jobs (d1 and d2 named fail, c1 named crash) and one that succeeded (ok),
    run by a worker in this process (setup); no worker running any more."""
    project.delay("fail", "one", job_id="d1")
    project.delay("fail", "two", job_id="d2")
    project.delay("crash", 7, job_id="c1")
    project.delay("add", 1, 2, job_id="ok")
    project.work_until(lambda: len(project.dead_ids()) == 3 and project.status("ok") == "SUCCESS")
    assert sorted(project.dead_ids()) == ["c1", "d1", "d2"]
    return project


ERRORS = {
    "d1": "ValueError: failing on purpose: one",
    "d2": "ValueError: failing on purpose: two",
    "c1": "RuntimeError: crashed with code 7",
}
NAMES = {"d1": "fail", "d2": "fail", "c1": "crash"}


def test_dead_list(dead: JobsProject) -> None:
    order = dead.dead_ids()  # oldest first
    lines = assert_ok(dead.run("jobs", "dead", "list", APP)).splitlines()
    assert len(lines) == 3, lines
    for line, job_id in zip(lines, order, strict=True):
        assert re.match(rf"^\S+\s+{job_id}\s+{NAMES[job_id]}\s+{re.escape(ERRORS[job_id])}$", line)

    rows = json.loads(assert_ok(dead.run("jobs", "dead", "list", APP, "--json")))
    assert [r["id"] for r in rows] == order
    for row in rows:
        assert (row["name"], row["error"]) == (NAMES[row["id"]], ERRORS[row["id"]])
        datetime.fromisoformat(row["died"])

    by_name = dead.run("jobs", "dead", "list", APP, "--job", "fail", "--json")
    assert [r["id"] for r in json.loads(assert_ok(by_name))] == [i for i in order if i != "c1"]
    by_id = dead.run("jobs", "dead", "list", APP, "--id", "c1", "--id", "d2", "--json")
    assert [r["id"] for r in json.loads(assert_ok(by_id))] == [
        i for i in order if i in ("c1", "d2")
    ]

    # An --id that is not a dead job (of that name) is an error, not an empty list.
    not_dead = dead.run("jobs", "dead", "list", APP, "--id", "ok")
    assert_one_error_line(not_dead, "'ok'")
    assert not_dead.stdout == ""
    other_name = dead.run("jobs", "dead", "list", APP, "--job", "fail", "--id", "c1")
    assert_one_error_line(other_name, "'c1'", "'fail'")


def test_dead_replay(dead: JobsProject) -> None:
    """Replayed jobs are enqueued again, tries reset, status SENT; a worker then runs them;
    the filters choose which; a job that is not dead is refused and nothing changes."""
    done = dead.run("jobs", "dead", "replay", APP, "--id", "d1")
    assert "replayed 1 " in assert_ok(done)
    job = dead.job("d1")
    assert (job["status"], job["tries"]) == ("SENT", "0")
    assert "error" not in job
    assert not dead.has_result("d1")
    assert dead.queued_ids() == ["d1"]
    assert sorted(dead.dead_ids()) == ["c1", "d2"]

    assert "replayed 1 " in assert_ok(dead.run("jobs", "dead", "replay", APP, "--job", "crash"))
    assert dead.status("c1") == "SENT"
    assert dead.queued_ids() == ["d1", "c1"]
    assert dead.dead_ids() == ["d2"]

    refused = dead.run("jobs", "dead", "replay", APP, "--id", "ok")
    assert_one_error_line(refused, "'ok'")
    assert dead.status("ok") == "SUCCESS"
    assert dead.queued_ids() == ["d1", "c1"]
    assert dead.dead_ids() == ["d2"]

    dead.client.set("healed", 1)
    with dead.worker() as worker:
        wait_for(lambda: dead.status("d1") == "SUCCESS" and dead.status("c1") == "SUCCESS")
        stopped(worker)
    assert dead.job("d1")["tries"] == "1"
    assert [r["tries"] for r in dead.records("ran:fail") if r["id"] == "d1"] == [1, 2, 1]
    assert dead.status("d2") == "DEAD"
    assert dead.dead_ids() == ["d2"]
    report = json.loads(assert_ok(dead.run("jobs", "show", APP, "d1", "--json")))
    assert report["result"] == "healed one"
    assert report["error"] is None


def test_dead_purge(dead: JobsProject) -> None:
    """Without --yes, purge asks: "n" deletes nothing, "y" deletes; the filters choose what;
    a job that is not dead is refused; --yes does not ask."""
    before = sorted(dead.dead_ids())
    asked = f"Purge 3 dead jobs of app {dead.app_name}?"
    declined = dead.on_terminal("jobs", "dead", "purge", APP, answer="n\n")
    assert declined == (1, f"{asked} [y/N]: ", "Aborted!\n")
    # Standard input not a terminal (< /dev/null), or ended: one line naming --yes.
    no_answer = "give --yes to purge without being asked"
    refused = dead.run("jobs", "dead", "purge", APP, input="")
    assert_one_error_line(refused, f'"{asked}" needs an answer', no_answer)
    assert refused.stdout == ""
    ended = dead.on_terminal("jobs", "dead", "purge", APP, answer="\x04")
    assert ended == (1, f"{asked} [y/N]: \n", f'Error: "{asked}" got no answer: {no_answer}\n')
    assert sorted(dead.dead_ids()) == before
    assert all(dead.status(i) == "DEAD" for i in before)

    confirmed = dead.on_terminal("jobs", "dead", "purge", APP, "--job", "fail", answer="y\n")
    assert confirmed[0] == 0, confirmed
    assert "Purge 2 dead jobs" in confirmed[1]
    assert "purged 2 " in confirmed[1]
    assert dead.dead_ids() == ["c1"]
    for job_id in ("d1", "d2"):
        assert dead.job(job_id) == {}
        assert not dead.has_result(job_id)
    assert dead.status("c1") == "DEAD"

    refused = dead.run("jobs", "dead", "purge", APP, "--id", "ok", "--yes")
    assert_one_error_line(refused, "'ok'")
    assert dead.status("ok") == "SUCCESS"
    assert dead.dead_ids() == ["c1"]

    done = dead.run("jobs", "dead", "purge", APP, "--yes")
    assert "purged 1 " in assert_ok(done)
    assert "Purge" not in done.stdout  # not asked
    assert dead.dead_ids() == []
    assert dead.job("c1") == {}
    assert dead.status("ok") == "SUCCESS"
    assert dead.has_result("ok")

    empty = dead.run("jobs", "dead", "list", APP)
    assert assert_ok(empty).strip() == "no dead jobs"


# --- runnel worker -----------------------------------------------------------------------


def test_worker_concurrency_caps_jobs_running_at_once(project: JobsProject) -> None:
    """--concurrency 3: with seven blocking jobs queued, three run and four wait; once
    released, all seven run, never more than three at a time."""
    for n in range(7):
        project.delay("gated", f"g{n}", job_id=f"g{n}")
    with project.worker("--concurrency", "3") as worker:
        wait_for(lambda: len(project.records("started")) == 3)
        report = json.loads(assert_ok(project.run("jobs", "info", APP, "--json")))
        assert (report["executing"], report["queued"]) == (3, 4)
        assert [e["concurrency"] for e in report["executors"]] == [3]
        project.release(7)
        wait_for(lambda: len(project.strings("finished")) == 7)
        stopped(worker)
    started = project.records("started")
    assert sorted(s["tag"] for s in started) == [f"g{n}" for n in range(7)]
    assert max(s["running"] for s in started) == 3, started
    assert all(project.status(f"g{n}") == "SUCCESS" for n in range(7))
    assert project.queued_ids() == []


def test_worker_no_jobs_then_a_full_worker_runs_both(project: JobsProject) -> None:
    """--no-jobs runs the processors and leaves the jobs queued; a worker without flags
    then runs both the app's stream processor and its job."""
    project.delay("mark", "m1", job_id="m1")
    project.send_ping("k", 1)
    with project.worker("--no-jobs", target=MIXED) as worker:
        wait_for(lambda: project.strings("seen") == ["k:1"])
        stopped(worker)
    assert "jobs=-" in worker.output
    assert project.status("m1", mixed=True) == "SENT"
    assert project.queued_ids(mixed=True) == ["m1"]
    assert not project.client.exists(project.key("executors", mixed=True))
    assert project.records("ran:mark") == []

    project.send_ping("k", 2)
    with project.worker(target=MIXED) as worker:
        wait_for(lambda: project.status("m1", mixed=True) == "SUCCESS")
        wait_for(lambda: len(project.strings("seen")) == 2)
        stopped(worker)
    assert project.strings("seen") == ["k:1", "k:2"]
    assert project.records("ran:mark") == [{"id": "m1", "tag": "m1"}]
    assert project.queued_ids(mixed=True) == []


def test_worker_no_processors_runs_only_jobs(project: JobsProject) -> None:
    project.delay("mark", "m1", job_id="m1")
    project.send_ping("k", 1)
    with project.worker("--no-processors", target=MIXED) as worker:
        wait_for(lambda: project.status("m1", mixed=True) == "SUCCESS")
        stopped(worker)
    assert "processors=-" in worker.output
    assert project.records("ran:mark") == [{"id": "m1", "tag": "m1"}]
    assert project.strings("seen") == []
    # The processor never joined: the event waits in its partition, no group reads it.
    assert project.client.xlen(project.partition()) == 1
    assert project.client.xinfo_groups(project.partition()) == []


def test_worker_processors_and_no_processors_refused(project: JobsProject) -> None:
    done = project.run("worker", MIXED, "--processors", "seen", "--no-processors")
    assert_one_error_line(done, "--processors", "--no-processors")
    assert list(project.client.scan_iter()) == []


def test_worker_sigterm_lets_a_running_job_finish(project: JobsProject) -> None:
    """SIGTERM while a job runs: the worker waits for it (within the grace period), records
    its success and exits 0."""
    project.delay("gated", "slow", job_id="slow")
    with project.worker() as worker:
        wait_for(lambda: project.records("started"))
        worker.signal(signal.SIGTERM)
        wait_for(lambda: "received SIGTERM" in worker.output)
        assert worker.proc.poll() is None, worker.output  # still waiting for the job
        project.release()
        assert worker.proc.wait(60) == 0, worker.output
    assert project.strings("finished") == ["slow"]
    job = project.job("slow")
    assert (job["status"], job["tries"]) == ("SUCCESS", "1")
    assert project.queued_ids() == []
    report = json.loads(assert_ok(project.run("jobs", "show", APP, "slow", "--json")))
    assert report["result"] == "slow"


# --- help ----------------------------------------------------------------------------------

HELP = {
    "runnel": ([], ["jobs", "worker"]),
    "jobs": (["jobs"], ["info", "show", "send", "dead"]),
    "worker": (["worker"], ["--concurrency", "--no-jobs", "--no-processors", "--processes"]),
}


@pytest.mark.parametrize("command,names", HELP.values(), ids=HELP.keys())
def test_help_lists_the_job_commands(
    project: JobsProject, command: list[str], names: list[str]
) -> None:
    out = assert_ok(project.run(*command, "--help"))
    assert out.startswith("Usage: runnel"), out
    for name in names:
        # A command or option at the start of its line ("--jobs / --no-jobs" counts both).
        assert re.search(rf"(^\s+|\s/\s){re.escape(name)}\b", out, re.MULTILINE), (name, out)
