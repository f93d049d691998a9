"""Every feature run as a Redis user holding exactly the rules `runnel acl` prints, on a
real redis-server: real worker processes (two, to rebalance), the producer and admin
commands of the CLI, the dashboard's reads; then Redis's ACL LOG must be empty, so a
command or key Runnel uses that the rules lack fails here.

The test's own client (the server's default user) only sets the user up and looks."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.acl import USER, create_user, delete_user, denied, with_user
from tests.support.dashboard import Dashboard
from tests.support.processes import WorkerProcess, cli, env_with, wait_for
from tests.support.redis_cluster import HOST, RedisClusterProcesses

APP = """
import asyncio

from runnel import App, Record, WindowClosed
from runnel.jobs import report_progress
from runnel.middleware.dead_letter import DeadLetterMiddleware

app = App(name={name!r})


class Sale(Record):
    shop: str
    at: float
    amount: int


sales = app.stream("sales", record=Sale, partition_by="shop", partition_count=4)
minute_totals = app.stream("minute_totals", record=WindowClosed, partition_by="key")
counts = app.table("counts", source=sales, default=0)
totals = app.table("per_minute", source=sales, default=0)
per_minute = totals.tumbling(60, time="at", grace=10, expires=3600, on_close=minute_totals)


@app.processor(sales, exception_policy="ignore", middleware=[DeadLetterMiddleware(sales)])
async def tally(events):
    async for sale in events.records():
        if sale.amount == -1:
            raise ValueError("a negative sale")
        counts[sale.shop] += 1
        per_minute[sale.shop] += sale.amount


@app.processor(sales, exception_policy="quarantine")
async def audit(events):
    async for sale in events.records():
        if sale.amount == -2:
            raise ValueError("poison")


@app.processor(minute_totals)
async def closed(events):
    async for _ in events.records():
        pass


@app.job
async def add(a: int, b: int) -> int:
    await report_progress(0.5, "halfway")
    return a + b


@app.job(retries=1)
async def boom() -> None:
    raise RuntimeError("always")


@app.job(queue="critical")
async def urgent(n: int) -> int:
    return n


@app.job(cron="* * * * * */1")
async def tick() -> None:
    pass


@app.job
async def slow() -> None:
    await asyncio.sleep(3600)


@app.job(rate_limit="20/s", concurrency_limit=1)
async def limited(n: int) -> int:
    return n


@app.job
async def total(values: list[int]) -> int:
    return sum(values)
"""

FLOW = """
import asyncio

from aclapp import app, limited, total
from runnel import chord, group


async def main() -> None:
    handle = await chord(group(limited.s(n) for n in range(5)), total.s()).delay()
    print(handle.id)
    print(await handle.get(timeout=120))
    await app.aclose()


asyncio.run(main())
"""


@dataclass
class Restricted:
    """The app's directory, the environment of a process running as the ACL user, and
    the server's (or every cluster master's) client as the default user, to look."""

    dir: Path
    name: str
    env: dict[str, str]
    nodes: list[redis.Redis]
    password: str

    def run(self, *args: str, input: str | None = None) -> str:
        done = cli(*args, cwd=self.dir, env=self.env, input=input)
        assert done.returncode == 0, (args, done.stdout, done.stderr, self.denied())
        return done.stdout

    def until(self, check: Callable[[], Any]) -> Any:
        """``wait_for``, saying what Redis refused the user if it never happens."""
        try:
            return wait_for(check)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; ACL LOG: {self.denied()}") from None

    def denied(self) -> list[dict]:
        return denied(self.nodes)


@pytest.fixture(params=["redis", "cluster"])
def restricted(
    request: pytest.FixtureRequest, tmp_path: Path, app_name: str
) -> Iterator[Restricted]:
    """The app, and the user `runnel acl` describes on a single Redis or on every master
    of a 3-master Redis Cluster (whose key layout the rules then follow)."""
    (tmp_path / "aclapp.py").write_text(textwrap.dedent(APP.format(name=app_name)))
    (tmp_path / "flow.py").write_text(FLOW)
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        nodes = [redis.Redis.from_url(url, decode_responses=True)]
    else:
        cluster: RedisClusterProcesses = request.getfixturevalue("redis_cluster")
        url = cluster.url
        nodes = [
            redis.Redis(host=HOST, port=node.port, decode_responses=True)
            for node in cluster.masters()
        ]
    printed = cli("acl", "aclapp:app", cwd=tmp_path, env=env_with(url))
    assert printed.returncode == 0, printed.stderr
    password = create_user(nodes, printed.stdout)
    env = env_with(with_user(url, password))
    try:
        yield Restricted(tmp_path, app_name, env, nodes, password)
    finally:
        delete_user(nodes)
        for node in nodes:
            node.close()


def sale(shop: str, amount: int, at: float = 1764000005) -> str:
    return json.dumps({"shop": shop, "at": at, "amount": amount})


def test_every_feature_runs_as_the_acl_user(restricted: Restricted) -> None:
    r = restricted
    # Producing: one event, then a batch (one negative: a dead letter; the last one
    # closes ada's first window, whose total goes to minute_totals).
    r.run("send", "aclapp:sales", sale("ada", 5))
    lines = [sale("ada", 7, 1764000030), sale("bob", 3), sale("cy", -1), sale("bob", 9)]
    lines.append(sale("ada", 1, 1764000131))
    r.run("sendmany", "aclapp:sales", "-", input="".join(x + "\n" for x in lines))
    r.run("jobs", "send", "aclapp:urgent", "[4]", "--job-id", "u1")  # the critical queue
    r.run("jobs", "send", "aclapp:slow", "[]", "--countdown", "3600", "--job-id", "later")
    r.run("jobs", "cancel", "aclapp:app", "later")

    with WorkerProcess("aclapp:app", r.dir, r.env) as first:
        # The table counts every sale but the negative one, a dead letter now.
        r.until(lambda: '"ada"\t3' in r.run("table", "dump", "aclapp:counts"))
        assert '"bob"\t2' in r.run("table", "dump", "aclapp:counts")
        r.until(lambda: "a negative sale" in r.run("dead", "list", "aclapp:sales"))
        # Jobs: one run with progress and a result waited on, one dead after its retry.
        added = r.run("jobs", "send", "aclapp:add", "[1, 2]", "--job-id", "a1", "--wait", "60")
        assert added.strip().endswith("3")
        assert "halfway" in r.run("jobs", "show", "aclapp:app", "a1")
        r.until(lambda: "SUCCESS" in r.run("jobs", "show", "aclapp:app", "u1"))
        r.run("jobs", "send", "aclapp:boom", "[]", "--job-id", "b1")
        r.until(lambda: "b1" in r.run("jobs", "dead", "list", "aclapp:app", "--yes"))
        # A second worker: the partitions are shared, then taken back when it stops.
        with WorkerProcess("aclapp:app", r.dir, r.env) as second:
            r.until(lambda: _owners(r) == 2)
            r.run("send", "aclapp:sales", sale("dee", -2))  # audit quarantines a partition
            quarantined = r.until(lambda: _quarantined(r))
            assert second.stop() == 0
        r.until(lambda: _owners(r) == 1)
        number, entry = quarantined
        r.run("processor", "skip", "aclapp:audit", "--partition", str(number), "--id", entry)
        r.until(lambda: not _quarantined(r))
        r.run("jobs", "dead", "replay", "aclapp:app", "--id", "b1", "--yes")
        r.until(lambda: "b1" in r.run("jobs", "dead", "list", "aclapp:app", "--yes"))
        r.until(lambda: "tick" in r.run("jobs", "info", "aclapp:app"))
        # A workflow (a chord) of jobs with a rate and a concurrency limit.
        flow = subprocess.run(
            [sys.executable, "flow.py"], cwd=r.dir, env=r.env, capture_output=True, text=True
        )
        assert flow.returncode == 0, (flow.stderr, r.denied())
        workflow, result = flow.stdout.split()
        assert result == "10"
        assert "COMPLETE" in r.run("jobs", "show", "aclapp:app", workflow)
        # The dashboard's reads, while the worker runs.
        board = Dashboard("aclapp:app", r.dir, r.env)
        try:
            with urllib.request.urlopen(board.url + "api/state", timeout=60) as reply:
                assert json.load(reply)
            reads = [f"api/jobs?list={x}" for x in ("recent", "running", "retrying", "dead")]
            for path in (*reads, "api/jobs?list=scheduled", "api/job-stats"):
                with urllib.request.urlopen(board.url + path, timeout=60) as reply:
                    assert json.load(reply), path
        finally:
            board.close()
        assert first.stop() == 0, first.output

    # The admin commands, with no worker running.
    r.run("status", "aclapp:app")
    r.run("status", "aclapp:app", "--json")
    r.run("table", "list", "aclapp:app")
    r.run("table", "get", "aclapp:per_minute", "ada")
    r.run("dead", "list", "aclapp:sales")
    r.run("dead", "replay", "aclapp:sales", "--yes")
    r.run("dead", "purge", "aclapp:sales", "--yes")
    r.run("jobs", "info", "aclapp:app", "--json")
    r.run("jobs", "show", "aclapp:app", "b1")
    r.run("jobs", "dead", "purge", "aclapp:app", "--yes")
    r.run("processor", "resume", "aclapp:audit")
    r.run("processor", "reset", "aclapp:tally", "--start", "0", "--keep-tables")
    r.run("table", "clear", "aclapp:counts", "--yes")
    assert r.denied() == []


def _owners(r: Restricted) -> int:
    report = json.loads(r.run("status", "aclapp:app", "--json"))
    (tally,) = [p for p in report["processors"] if p["name"] == "tally"]
    return len({p["owner"] for p in tally["partitions"] if p["owner"]})


def _quarantined(r: Restricted) -> tuple[int, str] | None:
    report = json.loads(r.run("status", "aclapp:app", "--json"))
    (audit,) = [p for p in report["processors"] if p["name"] == "audit"]
    for p in audit["partitions"]:
        if p["state"] == "QUARANTINED":
            return p["number"], p["failing_id"]
    return None


def test_the_rules_refuse_what_they_do_not_name(restricted: Restricted) -> None:
    """The user is really restricted: another app's keys and other commands are refused."""
    node = restricted.nodes[0].connection_pool.connection_kwargs
    user = redis.Redis(
        host=node["host"], port=node["port"], username=USER, password=restricted.password
    )
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            user.set("__strm:other.sales.0", "x")
        with pytest.raises(redis.exceptions.NoPermissionError):
            user.flushall()
    finally:
        user.close()
    assert {entry["reason"] for entry in restricted.denied()} == {"key", "command"}
