"""The operating commands on a 3-master Redis Cluster, with real `runnel worker` processes
and real `runnel` command lines: quarantines (status, skip, resume), `processor reset`,
`dead list|replay` of a stream, and `runnel jobs info|dead ...`.

Every app here has its partitions on all three masters (tests/support/spread.py), and
a failure is placed on a partition of each master, so a command that looked at one node
only would miss two of them. No command scans the key space: each names its keys through
the layout (a partition's key for each partition, the processor's or the app's tag for the
rest), and the checks below read each partition back from its own master.
"""

from __future__ import annotations

import json

from tests.support.processes import WorkerProcess, wait_for
from tests.support.spread import SpreadApp, spread_fixture

LONG = 120.0  # only bounds a hung test

APP = """
import os

import redis

from runnel import App, Record
from runnel.middleware.dead_letter import DeadLetterMiddleware

app = App(name={name!r}, default_join_delay=0)


class Ping(Record):
    key: str
    n: int


pings = app.stream("pings", record=Ping, partition_by="key", partition_count={partitions})
_client = None


def record(name, ping):
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ["TEST_RECORD_URL"])
    _client.rpush(name, f"{{ping.key}}:{{ping.n}}")
    return _client


@app.processor(pings, exception_policy="quarantine")
async def a(events):
    async for ping in events.records():
        client = record("tries", ping)
        if ping.n < 0 and not client.exists("cured"):
            raise ValueError(f"poison {{ping.n}}")
        record("seen:a", ping)


@app.processor(pings, exception_policy="ignore", middleware=[DeadLetterMiddleware(pings)])
async def b(events):
    async for ping in events.records():
        if ping.n < 0:
            raise ValueError(f"bad {{ping.n}}")
        record("seen:b", ping)


@app.job(retries=0)
async def fail(message: str) -> str:
    raise ValueError(f"failing on purpose: {{message}}")


@app.job()
async def double(x: int) -> int:
    return 2 * x
"""


spread = spread_fixture(APP, "opsapp")


def quarantined(spread: SpreadApp) -> dict[int, str]:
    return {
        n: p["failing_id"]
        for n, p in spread.partitions_of("a").items()
        if p["state"] == "QUARANTINED"
    }


def one_error_line(done: object) -> str:
    err = str(getattr(done, "stderr", "")).strip()
    assert getattr(done, "returncode", 0) != 0
    assert "Traceback" not in err + str(getattr(done, "stdout", ""))
    assert len(err.splitlines()) == 1 and err.startswith("Error:"), err
    return err


def test_quarantines_on_every_master_listed_skipped_and_resumed(spread: SpreadApp) -> None:
    """A poison event on a partition of each master: all three show as QUARANTINED (the
    quarantine hash is in the processor's slot, the events on three nodes); skip one,
    cure and resume the others; every event is then processed once, none left pending."""
    keys = spread.key_per_master()
    assert len(keys) == 3
    poison: dict[int, str] = {}
    with WorkerProcess(spread.target("app"), spread.dir, spread.env, "--processors", "a") as w:
        for i, (key, number) in enumerate(keys.values()):
            spread.send(key, i)
            poison[number] = spread.send(key, -1 - i)
            spread.send(key, 100 + i)
        wait_for(lambda: quarantined(spread) == poison, timeout=LONG)
        table = spread.run("status", spread.target("app")).stdout
        for failing in poison.values():
            assert f"QUARANTINED at {failing}" in table
        assert all(
            p["state"] == "owned" for n, p in spread.partitions_of("a").items() if n not in poison
        )

        first_key, first = next(iter(keys.values()))
        skipped = spread.run(
            "processor",
            "skip",
            spread.target("a"),
            "--partition",
            str(first),
            "--id",
            poison[first],
        )
        assert skipped.returncode == 0, skipped.stderr
        wait_for(lambda: f"{first_key}:100" in spread.listed("seen:a"), timeout=LONG)
        rest = {n: x for n, x in poison.items() if n != first}
        assert quarantined(spread) == rest

        spread.record.set("cured", 1)
        resumed = spread.run("processor", "resume", spread.target("a"))
        assert resumed.returncode == 0, resumed.stderr
        assert f"resumed partitions {', '.join(map(str, sorted(rest)))} of a" in resumed.stdout
        wait_for(lambda: len(spread.listed("seen:a")) == 8, timeout=LONG)
        wait_for(
            lambda: all(p["pending"] == 0 for p in spread.partitions_of("a").values()),
            timeout=LONG,
        )
        assert quarantined(spread) == {}
        assert w.stop() == 0, w.output
    seen = spread.listed("seen:a")
    for i, (key, number) in enumerate(keys.values()):
        mine = [x for x in seen if x.startswith(f"{key}:")]
        expected = [f"{key}:{i}", f"{key}:{100 + i}"]
        if number != first:
            expected.insert(1, f"{key}:{-1 - i}")  # cured and tried again, in order
        assert mine == expected
    for number in range(spread.partitions):
        info = spread.group_info(number, "a")
        assert info is not None and info["pending"] == 0


def test_reset_rewinds_every_partition_on_every_master(spread: SpreadApp) -> None:
    """`processor reset` refuses while a worker runs; stopped, it moves the group of each
    partition (read back from each partition's own master) and the worker then reads
    every event again; `--start $` skips to the end."""
    keys = spread.key_per_partition()
    events = "".join(json.dumps({"key": keys[i % 6], "n": i}) + "\n" for i in range(60))
    sent = spread.run("sendmany", spread.target("pings"), "-", input=events)
    assert sent.returncode == 0, sent.stderr
    lengths = {}
    for number in range(spread.partitions):
        with spread.node_client(number) as node:
            lengths[number] = node.xlen(spread.partition_key(number))
    assert lengths == {n: 10 for n in range(6)}

    with WorkerProcess(spread.target("app"), spread.dir, spread.env) as worker:
        wait_for(lambda: len(spread.listed("seen:a")) == 60, timeout=LONG)
        refused = spread.run("processor", "reset", spread.target("a"))
        assert "workers of a are running" in one_error_line(refused)
        assert f"pid {worker.proc.pid}" in refused.stderr
        assert worker.stop() == 0, worker.output

    done = spread.run("processor", "reset", spread.target("a"))
    assert done.returncode == 0, done.stderr
    assert "reset a on 6 partitions of pings to 0" in done.stdout
    for number in range(spread.partitions):
        info = spread.group_info(number, "a")
        assert info is not None
        assert info["last-delivered-id"] == b"0-0" and info["pending"] == 0
        assert spread.group_info(number, "b")["last-delivered-id"] != b"0-0"  # type: ignore[index]
    lags = {n: p["lag"] for n, p in spread.partitions_of("a").items()}
    assert lags == lengths
    assert all(p["lag"] == 0 for p in spread.partitions_of("b").values())

    with WorkerProcess(spread.target("app"), spread.dir, spread.env) as worker:
        wait_for(lambda: len(spread.listed("seen:a")) == 120, timeout=LONG)
        wait_for(
            lambda: all(p["lag"] == 0 for p in spread.partitions_of("a").values()), timeout=LONG
        )
        assert worker.stop() == 0, worker.output
    assert len(spread.listed("seen:b")) == 60, "b was not reset"

    to_end = spread.run("processor", "reset", spread.target("b"), "--start", "$")
    assert to_end.returncode == 0, to_end.stderr
    assert all(p["lag"] == 0 for p in spread.partitions_of("b").values())


def test_dead_letters_from_every_master_listed_and_replayed(spread: SpreadApp) -> None:
    """b dead-letters a failing event of each master's partition into its one-partition
    sink; `dead list` names the three partitions, `dead replay` sends each back to its
    own partition (a send over three masters), and the sink is empty after."""
    keys = spread.key_per_master()
    bad = {number: (key, -1 - i) for i, (key, number) in enumerate(keys.values())}
    lines = "".join(json.dumps({"key": key, "n": n}) + "\n" for key, n in bad.values())
    sent = spread.run("sendmany", spread.target("pings"), "-", input=lines)
    assert sent.returncode == 0, sent.stderr
    with WorkerProcess(spread.target("app"), spread.dir, spread.env, "--processors", "b") as w:

        def listed() -> list[str]:
            done = spread.run("dead", "list", spread.target("pings"))
            assert done.returncode == 0, done.stderr
            return done.stdout.splitlines()

        rows = wait_for(lambda: len(listed()) == 3 and listed(), timeout=LONG)
        assert w.stop() == 0, w.output
    assert sorted(int(row.split()[2]) for row in rows) == sorted(bad)
    before = {}
    for number in bad:
        with spread.node_client(number) as node:
            before[number] = node.xlen(spread.partition_key(number))

    done = spread.run("dead", "replay", spread.target("pings"))
    assert done.returncode == 0, done.stderr
    assert "replayed 3 dead letters" in done.stdout
    for number, (key, n) in bad.items():
        with spread.node_client(number) as node:
            entries = node.xrange(spread.partition_key(number))
        assert len(entries) == before[number] + 1
        assert json.loads(entries[-1][1][b"data"]) == {"key": key, "n": n}
    empty = spread.run("dead", "list", spread.target("pings"))
    assert empty.returncode == 0 and empty.stdout.strip() == "", empty.stdout


def test_job_admin_commands(spread: SpreadApp) -> None:
    """`jobs send`, `jobs info`, `jobs show` and `jobs dead list|replay|purge` on a
    cluster: the whole queue lies in the app's slot."""
    for job_id in ("d1", "d2"):
        sent = spread.run("jobs", "send", spread.target("fail"), '["boom"]', "--job-id", job_id)
        assert sent.returncode == 0, sent.stderr
    ok = spread.run("jobs", "send", spread.target("double"), "[21]", "--job-id", "ok")
    assert ok.returncode == 0, ok.stderr

    def info() -> dict:  # type: ignore[type-arg]
        done = spread.run("jobs", "info", spread.target("app"), "--json")
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    assert info()["queued"] == 3
    with WorkerProcess(spread.target("app"), spread.dir, spread.env, "--no-processors") as w:
        wait_for(lambda: info()["dead"] == 2 and info()["results"] >= 1, timeout=LONG)
        assert w.stop() == 0, w.output
    assert info()["queued"] == 0
    shown = spread.run("jobs", "show", spread.target("app"), "ok", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["result"] == 42

    dead = spread.run("jobs", "dead", "list", spread.target("app"), "--json")
    assert dead.returncode == 0, dead.stderr
    rows = json.loads(dead.stdout)
    assert sorted(r["id"] for r in rows) == ["d1", "d2"]
    assert all("failing on purpose: boom" in r["error"] for r in rows)

    replayed = spread.run("jobs", "dead", "replay", spread.target("app"), "--id", "d1")
    assert replayed.returncode == 0, replayed.stderr
    assert "replayed 1 dead job" in replayed.stdout
    after = info()
    assert (after["queued"], after["dead"]) == (1, 1)
    purged = spread.run("jobs", "dead", "purge", spread.target("app"), "--yes")
    assert purged.returncode == 0, purged.stderr
    assert "purged 1 dead job" in purged.stdout
    assert info()["dead"] == 0
