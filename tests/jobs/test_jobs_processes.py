"""The job queue across real worker processes, and ``runnel worker --processes N``.

Workers are killed (SIGKILL), frozen (SIGSTOP), stopped (SIGTERM, SIGINT) and their
supervisor killed, while jobs run. The app module (``jobsapp.py`` in ``tmp_path``) has
short timings (2 s job heartbeats, 2 s locks) and jobs that record every try they begin
and end in Redis (``runs``: ``start|finish:{job id}:{try}:{pid}``), so a test can tell
what ran where. ``hold`` jobs wait until their gate key is set: a test decides when a
job may end. A partitioned stream with a processor records every event it handles
(``seen``: ``{key}:{n}:{pid}``).

Each test ends with what must hold whatever the timing: every job ended as it should
(each ``SUCCESS`` with the outcome of its last try, by the worker that ran that try),
nothing left in the queue, and no process left behind.

Only ``redis_url`` says where Redis is: the app and the test reach it through clients
that also speak Redis Cluster (``redis+cluster://``), and name Runnel's keys through the
key layout of that URL, so tests/redis_cluster/ runs these tests again on a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import signal
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runnel.jobs import JobFailed, JobStatus
from runnel.jobs.model import JobRecord
from runnel_redis.layout import KeyLayout, layout_for
from tests.support.processes import WorkerProcess, cli, env_with, wait_for
from tests.support.worker_cluster import client_for, first_occurrences, is_stopped, pause

MODULE = "jobsapp"
PARTITIONS = 8
CONCURRENCY = 4
HANG = 60
"""Hang guard (seconds) of every wait: no assertion is made on how long anything took."""

APP_SOURCE = '''
import asyncio
import os
import signal
import time

import redis
from redis.cluster import RedisCluster

from runnel import App, Record
from runnel.jobs import current_job
from runnel_redis.cluster import client_url
from runnel_redis.layout import CLUSTER_SCHEMES

app = App(
    name={app_name!r},
    redis_url={redis_url!r},
    default_lock_expiry=2.0,
    default_join_delay=0.2,
    default_grace_period=float(os.environ.get("TEST_GRACE", "2")),
    default_read_timeout=200,
    default_assignment_sleep=0.25,
    leadership_poll_interval=300,
    job_heartbeat_timeout=2,
    job_backoff_base=0.05,
    job_concurrency={concurrency},
)

_sync = None


def aclient():
    """The app's own asyncio client (a cluster one for redis+cluster://)."""
    return app.redis


def sclient():
    """A blocking client for the plain-function job (run in a worker thread)."""
    global _sync
    if _sync is None:
        url = {redis_url!r}
        if url.split("://", 1)[0] in CLUSTER_SCHEMES:
            _sync = RedisCluster.from_url(client_url(url))
        else:
            _sync = redis.Redis.from_url(url)
    return _sync


def mark(what):
    job = current_job()
    return f"{{what}}:{{job.id}}:{{job.tries}}:{{os.getpid()}}"


@app.job(retries=3)
async def quick(n: int, pause: float = 0.05) -> int:
    await aclient().rpush("runs", mark("start"))
    await asyncio.sleep(pause)
    await aclient().rpush("runs", mark("finish"))
    return n


@app.job(retries=3)
async def hold(gate: str) -> str:
    """Runs until the key gate:{{gate}} exists; returns who finished it."""
    await aclient().rpush("runs", mark("start"))
    while not await aclient().exists("gate:" + gate):
        await asyncio.sleep(0.02)
    await aclient().rpush("runs", mark("finish"))
    return f"{{os.getpid()}}:{{current_job().tries}}"


@app.job(retries=3)
def hold_sync(gate: str) -> str:
    """hold, as a plain function (run in a worker thread)."""
    sclient().rpush("runs", mark("start"))
    while not sclient().exists("gate:" + gate):
        time.sleep(0.02)
    sclient().rpush("runs", mark("finish"))
    return f"{{os.getpid()}}:{{current_job().tries}}"


@app.job(retries=1)
async def suicide() -> None:
    """Kills the worker running it, every time."""
    await aclient().rpush("runs", mark("start"))
    os.kill(os.getpid(), signal.SIGKILL)
    await asyncio.sleep(60)


class Ping(Record):
    key: str
    n: int


pings = app.stream("pings", record=Ping, partition_by="key", partition_count={partitions})
PID = os.getpid()


@app.processor(pings)
async def work(events):
    async for ping in events.records():
        await aclient().rpush("seen", f"{{ping.key}}:{{ping.n}}:{{PID}}")
'''


@dataclass(frozen=True)
class Run:
    """A try of a job that began (``start``) or returned (``finish``) in process ``pid``."""

    kind: str
    id: str
    tries: int
    pid: int


def executor_pid(executor: str | None) -> int:
    """The pid in a job executor id (``host:pid:random``)."""
    assert executor, "no executor recorded"
    return int(executor.rsplit(":", 2)[1])


def gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for its parent counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def child_pids(parent: int) -> set[int]:
    """The live processes whose parent is ``parent`` (from /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == parent and fields[0] not in ("Z", "X"):
                out.add(int(stat.parent.name))
    return out


class Jobs:
    """The app directory, the processes started in it, and what they recorded."""

    def __init__(self, directory: Path, app_name: str, redis_url: str) -> None:
        self.dir = directory
        self.app_name = app_name
        self.redis_url = redis_url
        self.client = client_for(redis_url)
        self.layout: KeyLayout = layout_for(redis_url)
        self.processes: list[WorkerProcess] = []
        self.sent: list[dict[str, object]] = []
        name = f"{MODULE}_{app_name}"
        spec = importlib.util.spec_from_file_location(name, directory / f"{MODULE}.py")
        assert spec is not None and spec.loader is not None
        self.module: ModuleType = importlib.util.module_from_spec(spec)
        sys.modules[name] = self.module
        spec.loader.exec_module(self.module)
        self.target = f"{MODULE}:app"

    # Processes.

    def env(self, **extra: str) -> dict[str, str]:
        return env_with(self.redis_url, **extra)

    def start(self, *args: str, **env: str) -> WorkerProcess:
        """``runnel worker jobsapp:app *args``, its output (children's too) in a file."""
        worker = WorkerProcess(self.target, self.dir, self.env(**env), *args)
        self.processes.append(worker)
        return worker

    def run(self, *args: str, input: str | None = None):
        return cli(*args, cwd=self.dir, env=self.env(), input=input)

    def wait_ready(self, *workers: WorkerProcess) -> None:
        """Each worker's job executor has registered (and so takes jobs from now on)."""

        def ready() -> bool:
            for w in workers:
                assert w.proc.poll() is None, w.output
            pids = {e["pid"] for e in self.executors().values()}
            return all(w.proc.pid in pids for w in workers)

        wait_for(ready, HANG)

    def children(self, supervisor: WorkerProcess) -> dict[int, int]:
        """Slot -> pid of the supervisor's current children, from its log."""
        found: dict[int, int] = {}
        for slot, pid in re.findall(
            r"worker process (\d+) started \(pid (\d+)\)", supervisor.output
        ):
            found[int(slot)] = int(pid)
        return found

    def all_children(self, supervisor: WorkerProcess) -> list[int]:
        return [int(p) for p in re.findall(r"started \(pid (\d+)\)", supervisor.output)]

    def wait_children(self, supervisor: WorkerProcess, count: int) -> dict[int, int]:
        def started() -> dict[int, int] | None:
            assert supervisor.proc.poll() is None, supervisor.output
            children = self.children(supervisor)
            return children if len(children) == count else None

        return wait_for(started, HANG)

    def cleanup(self) -> None:
        """Kill whatever is left: workers, supervisors and their children (stopped ones
        woken first, so that the kill is delivered)."""
        pids = []
        for w in self.processes:
            pids.extend(self.all_children(w))
            pids.append(w.proc.pid)
        for pid in pids:
            if gone(pid) or not self._ours(pid):
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
        for w in self.processes:
            w.__exit__(None, None, None)
        for pid in pids:
            with contextlib.suppress(AssertionError):
                wait_for(lambda pid=pid: gone(pid) or not self._ours(pid), 10)

    def _ours(self, pid: int) -> bool:
        """A pid still naming one of our processes (not reused): it runs in our dir."""
        try:
            return Path(os.readlink(f"/proc/{pid}/cwd")) == self.dir
        except OSError:
            return False

    # Jobs.

    def enqueue(self, job: str, calls: list[tuple[str, list[Any]]]) -> list[str]:
        """Enqueue ``job`` once per (job id, args), all at once; the ids."""
        app = self.module.app

        async def go() -> None:
            try:
                fn = app.jobs[job]
                await asyncio.gather(*(fn.delay(*args, job_id=i) for i, args in calls))
            finally:
                await app.aclose()

        asyncio.run(go())
        return [i for i, _ in calls]

    def quick(self, prefix: str, count: int, pause: float = 0.05) -> list[str]:
        return self.enqueue("quick", [(f"{prefix}{n}", [n, pause]) for n in range(count)])

    def hold(self, job_id: str, gate: str, job: str = "hold") -> str:
        [done] = self.enqueue(job, [(job_id, [gate])])
        return done

    def open(self, gate: str) -> None:
        self.client.set(f"gate:{gate}", 1)

    def records(self, ids: list[str]) -> dict[str, JobRecord]:
        app = self.module.app

        async def go() -> dict[str, JobRecord]:
            try:
                out = {}
                for i in ids:
                    record = await app.job_store.job(i)
                    assert record is not None, f"job {i} is gone"
                    out[i] = record
                return out
            finally:
                await app.aclose()

        return asyncio.run(go())

    def record(self, job_id: str) -> JobRecord:
        return self.records([job_id])[job_id]

    def result(self, job: str, job_id: str) -> Any:
        app = self.module.app

        async def go() -> Any:
            try:
                return await app.jobs[job].result(job_id).get(timeout=HANG)
            finally:
                await app.aclose()

        return asyncio.run(go())

    def statuses(self, ids: list[str]) -> dict[str, JobStatus]:
        return {i: r.status for i, r in self.records(ids).items()}

    def wait_status(self, ids: list[str], status: JobStatus = JobStatus.SUCCESS) -> None:
        def reached() -> bool:
            return all(s == status for s in self.statuses(ids).values())

        wait_for(reached, HANG, interval=0.2)

    def runs(self) -> list[Run]:
        out = []
        for raw in self.client.lrange("runs", 0, -1):
            kind, job_id, tries, pid = raw.decode().split(":")
            out.append(Run(kind, job_id, int(tries), int(pid)))
        return out

    def started(self, job_id: str) -> list[Run]:
        return [r for r in self.runs() if r.kind == "start" and r.id == job_id]

    def running_on(self, pid: int, ids: list[str]) -> set[str]:
        """Jobs of ``ids`` whose try began in ``pid`` and has not returned there."""
        begun: set[tuple[str, int]] = set()
        for r in self.runs():
            if r.pid != pid or r.id not in ids:
                continue
            if r.kind == "start":
                begun.add((r.id, r.tries))
            else:
                begun.discard((r.id, r.tries))
        return {i for i, _ in begun}

    def executors(self) -> dict[str, dict]:
        """The registered job executors (alive or not): id -> their description."""
        raw = self.client.hgetall(self.layout.job_executors(self.app_name))
        return {k.decode(): json.loads(v) for k, v in raw.items()}

    @property
    def queue(self) -> str:
        """The app's job queue stream (its name by the key layout of the URL)."""
        return self.layout.job_queue(self.app_name)

    def job_key(self, job_id: str) -> str:
        return self.layout.job(self.app_name, job_id)

    def queue_length(self) -> int:
        return self.client.xlen(self.queue)

    def check_succeeded(self, ids: list[str], dead: int = 0) -> dict[str, JobRecord]:
        """Every job ended SUCCESS, its result from its last try, returned in the
        process that ran that try (the executor on record); nothing is left queued or
        scheduled, and ``dead`` jobs are dead."""
        self.wait_status(ids)
        records = self.records(ids)
        finished = {(r.id, r.tries, r.pid) for r in self.runs() if r.kind == "finish"}
        for i, record in records.items():
            assert record.status == JobStatus.SUCCESS, record
            assert record.error is None, record
            assert (i, record.tries, executor_pid(record.executor)) in finished, record
        wait_for(lambda: self.queue_length() == 0, HANG)
        assert self.client.zcard(self.layout.job_schedule(self.app_name)) == 0
        assert self.client.xlen(self.layout.job_dead(self.app_name)) == dead
        return records

    # Events.

    def send(self, count: int, keys: int = 24) -> None:
        """``runnel sendmany`` ``count`` more events, numbered on from the last ones."""
        start = len(self.sent)
        events = [{"key": f"k{n % keys}", "n": n} for n in range(start, start + count)]
        text = "".join(json.dumps(e) + "\n" for e in events)
        done = self.run("sendmany", f"{MODULE}:pings", "-", input=text)
        assert done.returncode == 0, done.stderr
        self.sent.extend(events)

    def seen(self) -> list[tuple[str, int, int]]:
        out = []
        for raw in self.client.lrange("seen", 0, -1):
            key, n, pid = raw.decode().split(":")
            out.append((key, int(n), int(pid)))
        return out

    def all_seen(self) -> bool:
        return {n for _, n, _ in self.seen()} >= {e["n"] for e in self.sent}

    def members(self) -> dict[str, dict]:
        raw = self.client.get(self.layout.membership(self.app_name, "pings", "work"))
        return json.loads(raw) if raw else {}

    def owners(self) -> dict[int, list[int]]:
        """pid -> partitions it owns, by the group's membership."""
        return {info["pid"]: sorted(info["partitions"]) for info in self.members().values()}

    def settled(self, pids: list[int]) -> bool:
        """Exactly these processes are members, each owning some of the partitions,
        every partition once."""
        owners = self.owners()
        return (
            sorted(owners) == sorted(pids)
            and all(owners.values())
            and sorted(p for ps in owners.values() for p in ps) == list(range(PARTITIONS))
        )

    def check_events(self) -> None:
        """Every event sent was handled, each key's in the order sent (duplicates aside)."""
        seen = self.seen()
        assert {n for _, n, _ in seen} == {e["n"] for e in self.sent}, "an event was lost"
        want: dict[str, list[int]] = {}
        for e in self.sent:
            want.setdefault(str(e["key"]), []).append(int(e["n"]))  # type: ignore[call-overload]
        got: dict[str, list[int]] = {}
        for key, n, _ in seen:
            got.setdefault(key, []).append(n)
        for key in want:
            assert first_occurrences(got[key]) == want[key], f"order broken for {key}"

    def logs(self) -> str:
        out = []
        for w in self.processes:
            out.append(f"--- pid {w.proc.pid} ({w.log_path.name}) ---")
            out.extend(w.output.splitlines()[-150:])
        return "\n".join(out)


@pytest.fixture
def jobs(tmp_path: Path, app_name: str, redis_url: str) -> Iterator[Jobs]:
    (tmp_path / f"{MODULE}.py").write_text(
        textwrap.dedent(
            APP_SOURCE.format(
                app_name=app_name,
                redis_url=redis_url,
                concurrency=CONCURRENCY,
                partitions=PARTITIONS,
            )
        )
    )
    j = Jobs(tmp_path, app_name, redis_url)
    try:
        yield j
    finally:
        j.cleanup()
        print(j.logs())  # shown with a failing test's report
        j.client.close()
        sys.modules.pop(j.module.__name__, None)


def exit_code(process: WorkerProcess) -> int:
    """Wait for a process told to stop already (sending nothing more: a second signal
    would mean "stop at once")."""
    return process.proc.wait(HANG)


def the_other(workers: list[WorkerProcess], pid: int) -> WorkerProcess:
    [other] = [w for w in workers if w.proc.pid != pid]
    return other


# 1. kill -9


def test_kill_9_mid_job_the_job_runs_again_elsewhere(jobs: Jobs) -> None:
    """A worker SIGKILLed while running jobs: once its heartbeat expires, the other
    worker takes them back and runs them (their second try) to SUCCESS; jobs enqueued
    around the kill all end SUCCESS too."""
    workers = [jobs.start(), jobs.start()]
    jobs.wait_ready(*workers)
    held = jobs.hold("held", "held")
    [first] = wait_for(lambda: jobs.started(held), HANG)
    victim = next(w for w in workers if w.proc.pid == first.pid)
    survivor = the_other(workers, first.pid)
    # Fill every slot of both workers with jobs that wait: the victim's 3 other slots
    # and the survivor's 4 (the rest stay queued).
    gated = jobs.enqueue("hold", [(f"gated{n}", ["batch"]) for n in range(12)])
    wait_for(
        lambda: (
            len(jobs.running_on(victim.proc.pid, gated)) == CONCURRENCY - 1
            and len(jobs.running_on(survivor.proc.pid, gated)) == CONCURRENCY
        ),
        HANG,
    )
    lost = jobs.running_on(victim.proc.pid, gated)

    victim.kill()
    assert victim.proc.returncode == -signal.SIGKILL
    after = jobs.quick("after", 12)
    jobs.open("batch")
    jobs.open("held")

    records = jobs.check_succeeded([held, *gated, *after])
    survivor_pid = survivor.proc.pid
    # The jobs the victim was running went back to the survivor: a second try each.
    for i in [held, *lost]:
        assert records[i].tries == 2, records[i]
        assert executor_pid(records[i].executor) == survivor_pid, records[i]
        assert [(r.tries, r.pid) for r in jobs.started(i)] == [
            (1, victim.proc.pid),
            (2, survivor_pid),
        ]
    for i in set(gated) - lost:
        assert records[i].tries == 1, records[i]
    assert all(r.pid != victim.proc.pid for r in jobs.runs() if r.kind == "finish")
    assert jobs.result("hold", held) == f"{survivor_pid}:2"
    assert "stopped beating; took back 4 of its jobs" in survivor.output, survivor.output

    shown = jobs.run("jobs", "show", jobs.target, held, "--json")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert (report["status"], report["tries"], report["error"]) == ("SUCCESS", 2, None)
    assert executor_pid(report["executor"]) == survivor_pid
    assert report["result"] == f"{survivor_pid}:2"
    assert survivor.stop() == 0, survivor.output


# 2. A job that kills its worker every time


def test_job_killing_its_worker_ends_dead_after_its_tries(jobs: Jobs) -> None:
    """A job that SIGKILLs the worker running it (retries=1), under a supervisor of two
    processes that restarts them: it is tried twice, then DEAD with WorkerLost, and run
    no more; the other jobs keep flowing."""
    supervisor = jobs.start("--processes", "2")
    children = jobs.wait_children(supervisor, 2)
    wait_for(lambda: {e["pid"] for e in jobs.executors().values()} == set(children.values()), HANG)
    before = jobs.quick("before", 16, pause=0.1)
    [doomed] = jobs.enqueue("suicide", [("doomed", [])])
    during = jobs.quick("during", 16, pause=0.1)

    jobs.wait_status([doomed], JobStatus.DEAD)
    record = jobs.record(doomed)
    assert record.tries == 2
    assert record.error is not None and record.error.type == "WorkerLost", record.error
    with pytest.raises(JobFailed) as failed:
        jobs.result("suicide", doomed)
    assert failed.value.type == "WorkerLost"
    # Jobs keep flowing (also those the dying workers had taken), and the dead job is
    # not run again meanwhile.
    later = jobs.quick("later", 16)
    jobs.wait_status([*before, *during, *later])
    tries = jobs.started(doomed)
    assert [r.tries for r in tries] == [1, 2], tries
    assert jobs.record(doomed).status == JobStatus.DEAD
    dead = jobs.run("jobs", "dead", "list", jobs.target, "--json")
    assert dead.returncode == 0, dead.stderr
    [letter] = json.loads(dead.stdout)
    assert letter["id"] == doomed and letter["name"] == "suicide"
    assert letter["error"].startswith("WorkerLost"), letter
    # Exactly the two workers that ran it died, and each was restarted.
    log = supervisor.output
    killed = re.findall(r"worker process \d+ \(pid (\d+)\) was killed by SIGKILL", log)
    assert sorted(map(int, killed)) == sorted(r.pid for r in tries), log
    wait_for(lambda: len(jobs.all_children(supervisor)) == 4, HANG)
    # Every other job ended SUCCESS from its last try.
    jobs.check_succeeded([*before, *during, *later], dead=1)
    children = jobs.children(supervisor)
    assert supervisor.stop() == 0, supervisor.output
    assert all(gone(pid) for pid in children.values())


# 3. SIGTERM mid-job


def test_sigterm_lets_a_job_finish_within_the_grace_period(jobs: Jobs) -> None:
    """SIGTERM while a job runs: the worker takes nothing more, lets the job finish
    (SUCCESS, one try) and exits 0."""
    worker = jobs.start(TEST_GRACE="60")
    jobs.wait_ready(worker)
    held = jobs.hold("held", "held")
    wait_for(lambda: jobs.started(held), HANG)
    worker.signal(signal.SIGTERM)
    wait_for(lambda: "waiting up to 60.0s for 1 running job" in worker.output, HANG)
    queued = jobs.quick("queued", 2)  # not taken any more
    assert jobs.record(held).status == JobStatus.EXECUTING
    jobs.open("held")
    assert exit_code(worker) == 0, worker.output
    record = jobs.record(held)
    assert (record.status, record.tries) == (JobStatus.SUCCESS, 1), record
    assert jobs.result("hold", held) == f"{worker.proc.pid}:1"
    assert all(r.status == JobStatus.SENT and r.tries == 0 for r in jobs.records(queued).values())
    assert jobs.executors() == {}, "the executor did not unregister"


@pytest.mark.parametrize("job", ["hold", "hold_sync"])
def test_sigterm_puts_a_job_longer_than_the_grace_period_back(jobs: Jobs, job: str) -> None:
    """SIGTERM while a job runs past the grace period: it is cancelled and goes back to
    the queue as it was (SENT, no try counted), the worker exits 0, and a worker
    started later runs it (SUCCESS, one try)."""
    first = jobs.start(TEST_GRACE="1")
    jobs.wait_ready(first)
    held = jobs.hold("held", "held", job=job)
    wait_for(lambda: jobs.started(held), HANG)
    assert first.stop() == 0, first.output
    assert "did not finish within 1.0s" in first.output, first.output
    record = jobs.record(held)
    assert (record.status, record.tries) == (JobStatus.SENT, 0), record
    assert jobs.queue_length() == 1
    assert jobs.client.xpending(jobs.queue, "workers")["pending"] == 0

    second = jobs.start()
    jobs.open("held")
    jobs.check_succeeded([held])
    record = jobs.record(held)
    assert record.tries == 1 and executor_pid(record.executor) == second.proc.pid, record
    assert [(r.tries, r.pid) for r in jobs.started(held)] == [
        (1, first.proc.pid),
        (1, second.proc.pid),
    ]
    assert jobs.result(job, held) == f"{second.proc.pid}:1"
    assert second.stop() == 0, second.output


# 4. SIGSTOP past the heartbeat timeout


def test_sigstop_past_the_heartbeat_the_late_outcome_is_refused(jobs: Jobs) -> None:
    """A worker frozen mid-job past its heartbeat timeout: the other one takes the job
    back and runs it to SUCCESS. Woken, the frozen one finishes its own run too, but
    its outcome is refused: the job's record stays the other worker's."""
    workers = [jobs.start(), jobs.start()]
    jobs.wait_ready(*workers)
    held = jobs.hold("held", "held")
    [first] = wait_for(lambda: jobs.started(held), HANG)
    frozen = next(w for w in workers if w.proc.pid == first.pid)
    steady = the_other(workers, first.pid)
    frozen.signal(signal.SIGSTOP)
    try:
        wait_for(lambda: is_stopped(frozen.proc.pid), HANG, interval=0.01)
        wait_for(lambda: len(jobs.started(held)) == 2, HANG)
        assert is_stopped(frozen.proc.pid)
        assert jobs.started(held)[1] == Run("start", held, 2, steady.proc.pid)
        jobs.open("held")
        jobs.wait_status([held])
        kept = jobs.client.hgetall(jobs.job_key(held))
    finally:
        frozen.signal(signal.SIGCONT)

    # The frozen run ends too (at least once: the function ran twice), and is refused.
    wait_for(
        lambda: (
            ("finish", 1, frozen.proc.pid)
            in {(r.kind, r.tries, r.pid) for r in jobs.runs() if r.id == held}
        ),
        HANG,
    )
    wait_for(lambda: f"job {held} was taken back from this worker" in frozen.output, HANG)
    assert jobs.client.hgetall(jobs.job_key(held)) == kept
    record = jobs.check_succeeded([held])[held]
    assert record.tries == 2 and executor_pid(record.executor) == steady.proc.pid, record
    assert jobs.result("hold", held) == f"{steady.proc.pid}:2"
    assert jobs.client.llen(jobs.layout.job_result(jobs.app_name, held)) == 1

    # Both work on.
    jobs.wait_ready(frozen, steady)
    more = jobs.quick("more", 4 * CONCURRENCY, pause=0.1)
    jobs.check_succeeded(more)
    assert {r.pid for r in jobs.runs() if r.id in more} == {frozen.proc.pid, steady.proc.pid}
    for w in (frozen, steady):
        assert w.stop() == 0, w.output


def test_sigstop_between_reading_a_job_and_starting_it(jobs: Jobs) -> None:
    """A worker frozen right after Redis handed it a job (its blocking read answered,
    the job not yet marked started), past its heartbeat timeout: the job goes back to
    the queue and the other worker runs it to SUCCESS. Woken, the frozen worker must not
    start its stale copy: the job's record stays SUCCESS, as the other worker left it."""
    busy = jobs.start()
    jobs.wait_ready(busy)
    # The busy worker's slots all held: it reads nothing while the other is frozen.
    gated = jobs.enqueue("hold", [(f"gated{n}", ["busy"]) for n in range(CONCURRENCY)])
    wait_for(lambda: len(jobs.running_on(busy.proc.pid, gated)) == CONCURRENCY, HANG)
    frozen = jobs.start()
    jobs.wait_ready(frozen)
    [consumer] = [e for e, info in jobs.executors().items() if info["pid"] == frozen.proc.pid]
    queue = jobs.queue
    try:
        for attempt in range(20):
            # Frozen while blocked in its read (where an idle worker spends its time), the
            # job enqueued next is handed to it by Redis at once, or not at all.
            pause(frozen)
            [stale] = jobs.quick(f"stale{attempt}", 1)
            handed = jobs.client.xpending_range(queue, "workers", "-", "+", 10, consumer)
            if handed:
                break
            frozen.signal(signal.SIGCONT)  # its read had ended: let it run this one
            jobs.wait_status([stale])
        else:
            pytest.fail("the frozen worker was never handed a job")
        assert jobs.record(stale).status == JobStatus.SENT
        # Taken back once its heartbeat expired, and run by the other worker.
        jobs.open("busy")
        jobs.wait_status([stale])
        kept = jobs.client.hgetall(jobs.job_key(stale))
        assert executor_pid(kept[b"executor"].decode()) == busy.proc.pid
    finally:
        frozen.signal(signal.SIGCONT)

    # Woken, it carries on: once it has run a job taken after that, its stale read is
    # behind it too.
    wait_for(lambda: not is_stopped(frozen.proc.pid), HANG)
    jobs.wait_ready(frozen, busy)
    more = jobs.quick("more", 4 * CONCURRENCY, pause=0.1)
    jobs.wait_status(more)
    assert any(r.pid == frozen.proc.pid for r in jobs.runs() if r.id in more)
    assert jobs.client.hgetall(jobs.job_key(stale)) == kept
    jobs.check_succeeded([*gated, stale, *more])
    for w in (frozen, busy):
        assert w.stop() == 0, w.output


# 5. runnel worker --processes 2: streams and jobs


def test_supervisor_runs_streams_and_jobs_and_restarts_a_killed_child(jobs: Jobs) -> None:
    """Two children share the partitions and the jobs; one SIGKILLed is restarted, the
    partitions rebalance, nothing is lost (events in order per key, every job SUCCESS);
    SIGTERM to the supervisor stops every child and it exits 0."""
    supervisor = jobs.start("--processes", "2")
    children = jobs.wait_children(supervisor, 2)
    pids = sorted(children.values())
    assert child_pids(supervisor.proc.pid) == set(pids)  # what it logged is what runs
    wait_for(lambda: jobs.settled(pids), HANG)
    report = json.loads(jobs.run("status", jobs.target, "--json").stdout)
    [processor] = report["processors"]
    assert sorted(e["pid"] for e in processor["executors"]) == pids
    assert all(e["partitions"] for e in processor["executors"])
    wait_for(lambda: {e["pid"] for e in jobs.executors().values()} == set(pids), HANG)

    first = jobs.quick("first", 32, pause=0.1)
    jobs.send(1000)
    jobs.check_succeeded(first)
    assert {r.pid for r in jobs.runs() if r.kind == "finish"} == set(pids), "a child idled"

    # Jobs held in every slot of both children, and events flowing, when one is killed.
    gated = jobs.enqueue("hold", [(f"gated{n}", ["gate"]) for n in range(2 * CONCURRENCY)])
    victim = children[1]
    wait_for(lambda: len(jobs.running_on(victim, gated)) == CONCURRENCY, HANG)
    lost = jobs.running_on(victim, gated)
    jobs.send(1500)
    wait_for(lambda: any(pid == victim and n >= 1000 for _, n, pid in jobs.seen()), HANG)
    os.kill(victim, signal.SIGKILL)

    wait_for(lambda: len(jobs.all_children(supervisor)) == 3, HANG)
    log = supervisor.output
    assert re.search(rf"worker process 1 \(pid {victim}\) was killed by SIGKILL after", log), log
    new = jobs.children(supervisor)
    assert new[2] == children[2] and new[1] not in pids
    pids = sorted(new.values())
    assert child_pids(supervisor.proc.pid) == set(pids)
    wait_for(lambda: jobs.settled(pids), HANG)
    wait_for(lambda: {e["pid"] for e in jobs.executors().values()} == set(pids), HANG)
    jobs.open("gate")
    jobs.send(500)
    last = jobs.quick("last", 32, pause=0.1)
    wait_for(jobs.all_seen, HANG, interval=0.2)
    jobs.check_events()
    records = jobs.check_succeeded([*first, *gated, *last])
    for i in lost:
        assert records[i].tries == 2 and executor_pid(records[i].executor) != victim
    assert {r.pid for r in jobs.runs() if r.kind == "finish" and r.id in last} == set(pids)
    assert jobs.settled(pids)

    supervisor.signal(signal.SIGTERM)
    assert exit_code(supervisor) == 0, supervisor.output
    assert "stopping 2 worker processes" in supervisor.output
    assert all(gone(pid) for pid in pids)
    assert supervisor.output.count("worker stopped") == 2, supervisor.output
    assert jobs.executors() == {} and jobs.members() == {}


# 6. SIGINT to the supervisor


def test_supervisor_sigint_stops_all_children_gracefully(jobs: Jobs) -> None:
    """SIGINT (Ctrl-C) to the supervisor: it forwards one SIGTERM to each child, a job
    running finishes, and everything exits 0."""
    supervisor = jobs.start("--processes", "2", TEST_GRACE="60")
    children = jobs.wait_children(supervisor, 2)
    wait_for(lambda: {e["pid"] for e in jobs.executors().values()} == set(children.values()), HANG)
    held = jobs.hold("held", "held")
    wait_for(lambda: jobs.started(held), HANG)
    supervisor.signal(signal.SIGINT)
    wait_for(lambda: supervisor.output.count("worker stopping: received SIGTERM") == 2, HANG)
    wait_for(lambda: "waiting up to 60.0s for 1 running job" in supervisor.output, HANG)
    assert supervisor.proc.poll() is None  # waiting for the job
    jobs.open("held")
    assert exit_code(supervisor) == 0, supervisor.output
    assert all(gone(pid) for pid in children.values())
    jobs.check_succeeded([held])


def test_supervisor_second_sigint_stops_at_once(jobs: Jobs) -> None:
    """A second SIGINT while the children wait for a running job: they stop at once and
    the supervisor exits non-zero; the job is not lost (a worker started later runs it)."""
    supervisor = jobs.start("--processes", "2", TEST_GRACE="60")
    children = jobs.wait_children(supervisor, 2)
    wait_for(lambda: {e["pid"] for e in jobs.executors().values()} == set(children.values()), HANG)
    held = jobs.hold("held", "held")
    wait_for(lambda: jobs.started(held), HANG)
    supervisor.signal(signal.SIGINT)
    wait_for(lambda: "waiting up to 60.0s for 1 running job" in supervisor.output, HANG)
    supervisor.signal(signal.SIGINT)
    code = exit_code(supervisor)
    assert code != 0, supervisor.output
    assert "signalled again" in supervisor.output
    assert all(gone(pid) for pid in children.values())

    later = jobs.start()
    jobs.open("held")
    jobs.check_succeeded([held])
    assert later.stop() == 0, later.output


# 7. The supervisor killed


def test_children_stop_when_the_supervisor_is_killed(jobs: Jobs) -> None:
    """SIGKILL to the supervisor: Linux sends each child SIGTERM (PDEATHSIG); they stop
    gracefully and exit."""
    supervisor = jobs.start("--processes", "2")
    children = jobs.wait_children(supervisor, 2)
    wait_for(lambda: {e["pid"] for e in jobs.executors().values()} == set(children.values()), HANG)
    assert child_pids(supervisor.proc.pid) == set(children.values())
    supervisor.kill()
    wait_for(lambda: all(gone(pid) for pid in children.values()), HANG)
    log = supervisor.output
    assert log.count("worker stopping: received SIGTERM") == 2, log
    assert log.count("worker stopped") == 2, log
    assert jobs.executors() == {}
