"""`runnel` commands and `runnel worker` processes on ``redis+sentinel://``: they work
through the sentinels, never print a password, and a worker process follows a failover
(``SENTINEL FAILOVER``, and the master killed with SIGKILL) without a restart.

The app (tests/support/cli_app.py) records what its processors saw on the session's
plain redis-server (``TEST_RECORD_URL``), which no failover touches."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import redis

from runnel import App, Record
from runnel.exceptions import RunnelError
from tests.support.apps import eventually
from tests.support.cli_app import MODULE, Project, write_app
from tests.support.processes import WorkerProcess, wait_for
from tests.support.sentinel import DATA_PASSWORD, SENTINEL_PASSWORD, SentinelGroup

APP = f"{MODULE}:app"
STREAM = f"{MODULE}:pings"


class Ping(Record):  # as the app module declares it
    key: str
    n: int


@pytest.fixture
def project(
    tmp_path: Path, app_name: str, sentinel_url: str, redis_url: str, redis_client: redis.Redis
) -> Project:
    write_app(tmp_path, app_name)
    return Project(dir=tmp_path, app_name=app_name, redis_url=sentinel_url, client=redis_client)


def env(project: Project, record_url: str, **extra: str) -> dict[str, str]:
    return project.env_with(TEST_RECORD_URL=record_url, **extra)


def no_password(*texts: str) -> None:
    for text in texts:
        assert DATA_PASSWORD not in text and SENTINEL_PASSWORD not in text, text


def one_error_line(done: Any) -> str:
    assert done.returncode != 0, (done.stdout, done.stderr)
    err = done.stderr.strip()
    assert "Traceback" not in done.stdout + done.stderr
    assert len(err.splitlines()) == 1 and err.startswith("Error:"), done.stderr
    no_password(done.stdout, done.stderr)
    return err


def test_send_worker_status_and_acl_through_the_sentinels(project: Project, redis_url: str) -> None:
    e = env(project, redis_url)
    done = project.run("send", STREAM, '{"key": "k1", "n": 7}', env=e)
    assert done.returncode == 0, done.stderr
    no_password(done.stdout, done.stderr)
    with WorkerProcess(APP, project.dir, e) as worker:
        wait_for(lambda: project.seen("a") == ["k1:7"] and project.seen("b") == ["k1:7"])
        status = project.run("status", APP, env=e)
        assert status.returncode == 0, status.stderr
        assert "a" in status.stdout and "b" in status.stdout
        no_password(status.stdout, status.stderr)
        assert worker.stop() == 0
        no_password(worker.output)
    acl = project.run("acl", APP, env=e)
    assert acl.returncode == 0, acl.stderr
    assert acl.stdout.splitlines()[0] == "ACL SETUSER runnel reset on >PASSWORD"
    no_password(acl.stdout, acl.stderr)


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://:{data}@127.0.0.1:1/?sentinel_password={sentinel}",
        "redis+sentinel://:{data}@127.0.0.1:1,127.0.0.1:x/runnel?sentinel_password={sentinel}",
        "redis+sentinel://:{data}@127.0.0.1:1/runnel/0?sentinel_pasword={sentinel}",
    ],
)
def test_a_bad_sentinel_url_is_one_error_line(project: Project, redis_url: str, url: str) -> None:
    bad = url.format(data=DATA_PASSWORD, sentinel=SENTINEL_PASSWORD)
    done = project.run("status", APP, env=env(project, redis_url, RUNNEL_REDIS_URL=bad))
    err = one_error_line(done)
    assert "redis+sentinel://" in err


def test_a_wrong_sentinel_password_is_one_error_line(
    project: Project, redis_url: str, sentinels: SentinelGroup
) -> None:
    bad = sentinels.url().replace(SENTINEL_PASSWORD, "not-it")
    done = project.run("status", APP, env=env(project, redis_url, RUNNEL_REDIS_URL=bad))
    err = one_error_line(done)
    assert "sentinel" in err and "sentinel_password" in err and "not-it" not in err


async def produce(app: App, sent: list[int], stop: asyncio.Event) -> None:
    """Send one event after another; remember those whose send returned."""
    stream = app.stream("pings", record=Ping, partition_by="key", partition_count=4)
    n = 0
    while not stop.is_set():
        try:
            await stream.send(Ping(key=f"k{n % 7}", n=n))
            sent.append(n)
        except RunnelError:  # a failover under way (or too few replicas): not known sent
            await asyncio.sleep(0.05)
        n += 1
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("how", ["sentinel-failover", "master-killed"])
async def test_a_worker_process_and_a_producer_follow_a_failover(
    project: Project, redis_url: str, sentinels: SentinelGroup, how: str
) -> None:
    """Every event whose send returned, before, during and after, is processed by the
    same worker process. Sends wait for a replica (``wait_replicas=1``): a write the old
    master acknowledged alone, before the replica had it, is lost when the replica is
    promoted (docs/high-availability.md)."""
    producer_app = App(
        name=project.app_name, redis_url=project.redis_url, wait_replicas=1, wait_timeout=2
    )
    sent: list[int] = []
    stop = asyncio.Event()

    def seen() -> set[int]:
        return {int(item.rpartition(":")[2]) for item in project.seen("a")}

    with WorkerProcess(APP, project.dir, env(project, redis_url)) as worker:
        producer = asyncio.create_task(produce(producer_app, sent, stop))
        await eventually(lambda: len(seen()) >= 50, "processing started")
        if how == "sentinel-failover":
            await asyncio.to_thread(sentinels.failover)
        else:
            killed = await asyncio.to_thread(sentinels.kill_master)
            # The new master has no replica until the old one is back: sends raise
            # NotReplicated (in Redis, but not known to be safe) meanwhile.
            await asyncio.to_thread(sentinels.revive, killed)
        before = len(sent)
        await eventually(lambda: len(sent) >= before + 100, "sends go on after the failover")
        stop.set()
        await producer
        await eventually(lambda: set(sent) <= seen(), "every sent event processed")
        assert worker.proc.poll() is None, worker.output  # the same process throughout
        assert worker.stop() == 0, worker.output
        no_password(worker.output)
    await producer_app.aclose()
