"""``/healthz`` and ``/readyz`` of real ``runnel worker`` processes (docs/operations.md,
"Health probes"): ready while the worker reaches its Redis and holds its membership, not
ready while that Redis is gone and ready again once it is back, live all along; alone on
``--health-port``, beside ``/metrics``, and from the supervisor of ``--processes 2``."""

from __future__ import annotations

import json
import os
import re
import signal
import textwrap
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import redis

from runnel_redis.embedded import Server, start_server
from runnel_redis.keys import membership
from tests.support.metrics_scrape import present, scrape
from tests.support.ports import free_port, start_redis
from tests.support.processes import WorkerProcess, cli, env_with, wait_for

HANG = 90

APP_SOURCE = """
from runnel import App, Record

app = App(
    name={app_name!r},
    default_lock_expiry=2.0,
    default_join_delay=0.2,
    default_read_timeout=200,
    default_assignment_sleep=0.25,
    leadership_poll_interval=300,
    job_heartbeat_timeout=2,
)


class Ping(Record):
    key: str


pings = app.stream("pings", record=Ping, partition_by="key", partition_count={partitions})


@app.processor(pings)
async def work(events):
    async for _ in events.records():
        pass


@app.job
async def double(n: int) -> int:
    return 2 * n
"""


def probe(port: int, path: str) -> tuple[int, dict[str, Any]] | None:
    """The status and JSON body of GET http://127.0.0.1:port/path; None if nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError:
        return None


def answers(port: int, path: str, status: int) -> dict[str, Any] | None:
    """The body, once ``path`` answers ``status``."""
    found = probe(port, path)
    return found[1] if found is not None and found[0] == status else None


def stop_redis(server: Server) -> None:
    os.kill(server.pid, signal.SIGTERM)
    wait_for(lambda: not _running(server.pid), HANG)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def redis_dir(tmp_path: Path) -> Path:
    return tmp_path / "redis"


@pytest.fixture
def own_redis(redis_dir: Path) -> Any:
    """A redis-server of this test's own (kept on disk, so that one started again on its
    port has the same data), which the test stops and starts again."""
    servers = [start_redis(redis_dir, persist=True)]
    yield servers
    for server in servers:
        if _running(server.pid):
            os.kill(server.pid, signal.SIGTERM)


def project(tmp_path: Path, app_name: str, partitions: int) -> None:
    source = APP_SOURCE.format(app_name=app_name, partitions=partitions)
    (tmp_path / "probedapp.py").write_text(textwrap.dedent(source))


def test_ready_follows_redis_and_live_stays(
    tmp_path: Path, app_name: str, own_redis: list[Server], redis_dir: Path
) -> None:
    """One worker with ``--health-port`` (no metrics): its Redis goes away and comes back."""
    server = own_redis[0]
    project(tmp_path, app_name, partitions=4)
    port = free_port()
    env = env_with(server.url)
    args = ("--health-port", str(port), "--health-host", "127.0.0.1")
    with WorkerProcess("probedapp:app", tmp_path, env, *args) as worker:
        assert wait_for(lambda: answers(port, "/readyz", 200), HANG) == {
            "status": "ready",
            "reasons": [],
        }
        assert answers(port, "/healthz", 200) == {"status": "live", "reasons": []}
        assert probe(port, "/metrics") == (404, {"error": "not found"})  # no metrics asked

        stop_redis(server)
        down = wait_for(lambda: answers(port, "/readyz", 503), HANG)
        assert down["status"] == "not ready"
        assert any(r.startswith("store: the store failed: ") for r in down["reasons"]), down
        # Still running its loops: live, and it stays so while Redis is away.
        wait_for(lambda: any(r.startswith("processor work: ") for r in ready_reasons(port)), HANG)
        wait_for(lambda: any(r.startswith("jobs: ") for r in ready_reasons(port)), HANG)
        assert answers(port, "/healthz", 200) == {"status": "live", "reasons": []}

        own_redis.append(start_server(redis_dir, port=server.port, persist=True))
        wait_for(lambda: answers(port, "/readyz", 200), HANG)
        assert answers(port, "/healthz", 200) == {"status": "live", "reasons": []}
        assert worker.proc.poll() is None, worker.output
        assert worker.stop() == 0, worker.output
    assert probe(port, "/healthz") is None  # the probes end with the worker


def children(supervisor: WorkerProcess) -> list[int]:
    return [int(p) for p in re.findall(r"started \(pid (\d+)\)", supervisor.output)]


def ready_reasons(port: int) -> list[str]:
    found = probe(port, "/readyz")
    return found[1]["reasons"] if found is not None and found[0] == 503 else []


def test_supervisor_answers_for_two_processes(
    tmp_path: Path, app_name: str, own_redis: list[Server], redis_dir: Path
) -> None:
    """``--processes 2 --metrics-port P``: one endpoint serves /metrics and the probes for
    both children; a child wedged fails /healthz until it runs again."""
    server = own_redis[0]
    project(tmp_path, app_name, partitions=1)  # one child holds it, the other is idle
    port = free_port()
    env = env_with(server.url, RUNNEL_LIVENESS_TIMEOUT="3")
    args = ("--processes", "2", "--metrics-port", str(port), "--metrics-host", "127.0.0.1")
    with WorkerProcess("probedapp:app", tmp_path, env, *args) as supervisor:
        wait_for(lambda: answers(port, "/readyz", 200), HANG)
        assert answers(port, "/healthz", 200) == {"status": "live", "reasons": []}
        assert present(scrape(port), "runnel_partitions_owned")

        stop_redis(server)
        down = wait_for(lambda: answers(port, "/readyz", 503), HANG)
        assert down["status"] == "not ready"
        # Each child says why, under its number.
        for number in (1, 2):
            wait_for(
                lambda n=number: any(
                    r.startswith(f"process {n} (pid ") for r in ready_reasons(port)
                ),
                HANG,
            )
        assert answers(port, "/healthz", 200) == {"status": "live", "reasons": []}

        own_redis.append(start_server(redis_dir, port=server.port, persist=True))
        wait_for(lambda: answers(port, "/readyz", 200), HANG)
        assert answers(port, "/healthz", 200) == {"status": "live", "reasons": []}

        # A child whose loop stops running (stopped here; wedged, in life) fails /healthz
        # once liveness_timeout has passed, and passes again when it runs again.
        child = children(supervisor)[0]
        os.kill(child, signal.SIGSTOP)
        try:
            wedged = wait_for(lambda: answers(port, "/healthz", 503), HANG)
        finally:
            os.kill(child, signal.SIGCONT)
        assert wedged["status"] == "not live"
        assert any(
            r.startswith(f"process 1 (pid {child}): its event loop has not run for ")
            for r in wedged["reasons"]
        ), wedged
        wait_for(lambda: answers(port, "/healthz", 200), HANG)
        wait_for(lambda: answers(port, "/readyz", 200), HANG)
        assert supervisor.stop() == 0, supervisor.output


def test_members_lost_from_the_store_join_again(
    tmp_path: Path, app_name: str, own_redis: list[Server]
) -> None:
    """The membership gone from Redis (evicted, deleted, a Redis that lost it) while every
    lock and heartbeat stays: two processes, one partition. No executor is told (no lock
    lost, no control message): each one's maintenance must see it is no longer a member
    and join again; meanwhile /readyz says why it is not ready."""
    server = own_redis[0]
    project(tmp_path, app_name, partitions=1)
    port = free_port()
    env = env_with(server.url)
    args = ("--processes", "2", "--health-port", str(port), "--health-host", "127.0.0.1")
    with WorkerProcess("probedapp:app", tmp_path, env, *args) as supervisor:
        wait_for(lambda: answers(port, "/readyz", 200), HANG)
        assert probe(port, "/metrics") == (404, {"error": "not found"})  # no metrics asked
        assert set(member_pids(tmp_path, env)) == set(children(supervisor))

        client = redis.Redis(port=server.port)
        assert client.delete(membership(app_name, "pings", "work")) == 1
        client.close()
        wait_for(lambda: sorted(member_pids(tmp_path, env)) == sorted(children(supervisor)), HANG)
        wait_for(lambda: answers(port, "/readyz", 200), HANG)
        assert answers(port, "/healthz", 200) == {"status": "live", "reasons": []}
        assert supervisor.stop() == 0, supervisor.output


def member_pids(cwd: Path, env: dict[str, str]) -> list[int]:
    """The process ids of the processor's members, as ``runnel status`` reads them."""
    done = cli("status", "probedapp:app", "--json", cwd=cwd, env=env)
    return [ex["pid"] for ex in json.loads(done.stdout)["processors"][0]["executors"]]
