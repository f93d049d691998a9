"""``runnel worker --processes 2 --metrics-port P``: one endpoint, served by the
supervisor, whose totals cover both children (prometheus_client's multiprocess mode)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import textwrap
from pathlib import Path

from runnel import App, Record
from tests.support.metrics_scrape import Samples, scrape, total
from tests.support.ports import free_port
from tests.support.processes import WorkerProcess, cli, env_with, wait_for

HANG = 60
PARTITIONS = 8
EVENTS = 120
JOBS = 20

APP_SOURCE = """
from runnel import App, Record

app = App(
    name={app_name!r},
    redis_url={redis_url!r},
    default_lock_expiry=2.0,
    default_join_delay=0.2,
    default_read_timeout=200,
    default_assignment_sleep=0.25,
    leadership_poll_interval=300,
    job_heartbeat_timeout=2,
)


class Ping(Record):
    key: str
    n: int


pings = app.stream("pings", record=Ping, partition_by="key", partition_count={partitions})


@app.processor(pings)
async def work(events):
    async for _ in events.records():
        pass


@app.job
async def double(n: int) -> int:
    return 2 * n
"""


class Ping(Record):
    key: str
    n: int


async def send_work(app_name: str, redis_url: str) -> None:
    """Events and jobs from this process, through an App of the same name."""
    app = App(name=app_name, redis_url=redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=PARTITIONS)

    @app.job
    async def double(n: int) -> int:
        return 2 * n

    await pings.send(*[Ping(key=f"k{i}", n=i) for i in range(EVENTS)])
    for n in range(JOBS):
        await double.delay(n)
    await app.aclose()


def children(supervisor: WorkerProcess) -> list[int]:
    return [int(p) for p in re.findall(r"started \(pid (\d+)\)", supervisor.output)]


def metrics_dir(pid: int) -> Path:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    found = [e.split(b"=", 1)[1] for e in environ if e.startswith(b"PROMETHEUS_MULTIPROC_DIR=")]
    assert found, f"child {pid} has no PROMETHEUS_MULTIPROC_DIR"
    return Path(found[0].decode())


def test_one_endpoint_for_all_processes(tmp_path: Path, app_name: str, redis_url: str) -> None:
    (tmp_path / "metricsapp.py").write_text(
        textwrap.dedent(
            APP_SOURCE.format(app_name=app_name, redis_url=redis_url, partitions=PARTITIONS)
        )
    )
    env = env_with(redis_url)
    port = free_port()
    args = ("--processes", "2", "--metrics-port", str(port), "--metrics-host", "127.0.0.1")
    with WorkerProcess("metricsapp:app", tmp_path, env, *args) as supervisor:
        pids = wait_for(lambda: len(children(supervisor)) == 2 and children(supervisor), HANG)
        directory = metrics_dir(pids[0])
        assert metrics_dir(pids[1]) == directory

        def shared() -> bool:
            """Both children own partitions (so each processes some of the events)."""
            assert supervisor.proc.poll() is None, supervisor.output
            done = cli("status", "metricsapp:app", "--json", cwd=tmp_path, env=env)
            executors = json.loads(done.stdout)["processors"][0]["executors"]
            owners = {ex["pid"] for ex in executors if ex["alive"] and ex["partitions"]}
            return owners == set(pids)

        wait_for(shared, HANG, interval=0.5)
        asyncio.run(send_work(app_name, redis_url))

        def counted() -> Samples | None:
            samples = scrape(port)
            done = (
                total(samples, "runnel_events_processed_total", processor="work") == EVENTS
                and total(samples, "runnel_jobs_succeeded_total", job="double") == JOBS
                and total(samples, "runnel_partitions_owned", processor="work") == PARTITIONS
            )
            return samples if done else None

        samples = wait_for(counted, HANG, interval=0.3)
        assert total(samples, "runnel_acks_sent_total", processor="work") == EVENTS
        assert total(samples, "runnel_jobs_started_total", job="double") == JOBS
        assert total(samples, "runnel_job_run_seconds_count", job="double") == JOBS
        assert wait_for(lambda: total(scrape(port), "runnel_leader", app=app_name) == 1, HANG)
        # Both children wrote their own counters into the supervisor's directory.
        for pid in pids:
            assert (directory / f"counter_{pid}.db").exists(), sorted(os.listdir(directory))

        assert supervisor.stop() == 0, supervisor.output
    assert not directory.exists()


def test_a_dead_child_leaves_its_counts(tmp_path: Path, app_name: str, redis_url: str) -> None:
    """A child killed and restarted: its live gauges go, what it counted stays."""
    (tmp_path / "metricsapp.py").write_text(
        textwrap.dedent(
            APP_SOURCE.format(app_name=app_name, redis_url=redis_url, partitions=PARTITIONS)
        )
    )
    env = env_with(redis_url)
    port = free_port()
    args = ("--processes", "2", "--metrics-port", str(port), "--metrics-host", "127.0.0.1")
    with WorkerProcess("metricsapp:app", tmp_path, env, *args) as supervisor:
        pids = wait_for(lambda: len(children(supervisor)) == 2 and children(supervisor), HANG)
        directory = metrics_dir(pids[0])
        wait_for(lambda: total(scrape(port), "runnel_partitions_owned") == PARTITIONS, HANG)
        asyncio.run(send_work(app_name, redis_url))
        wait_for(lambda: total(scrape(port), "runnel_jobs_succeeded_total") == JOBS, HANG)
        os.kill(pids[0], signal.SIGKILL)
        wait_for(lambda: len(children(supervisor)) == 3, HANG)
        wait_for(lambda: not list(directory.glob(f"gauge_live*_{pids[0]}.db")), HANG)
        assert total(scrape(port), "runnel_jobs_succeeded_total") == JOBS
        assert supervisor.stop() == 0, supervisor.output
