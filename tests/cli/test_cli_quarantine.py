"""A poison event under QUARANTINE, seen and handled from the command line with a real
worker process: `runnel status`, `runnel processor skip` and `runnel processor resume`;
and `runnel processor reset` refusing while workers run."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.support.cli_app import Project
from tests.support.processes import WorkerProcess, wait_for

POISON_APP = """
import os

import redis

from runnel import App, Record

app = App(name={name!r})


class Ping(Record):
    key: str
    n: int


pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
_client = redis.Redis.from_url(os.environ["TEST_RECORD_URL"])


@app.processor(pings, exception_policy="quarantine")
async def a(events):
    async for ping in events.records():
        _client.rpush("tries", f"{{ping.key}}:{{ping.n}}")
        if ping.n < 0 and not _client.exists("cured"):
            raise ValueError(f"poison {{ping.n}}")
        _client.rpush("seen", f"{{ping.key}}:{{ping.n}}")
"""

PROC = "poisonapp:a"


@pytest.fixture
def poison(project: Project) -> Project:
    (project.dir / "poisonapp.py").write_text(
        textwrap.dedent(POISON_APP.format(name=project.app_name))
    )
    return project


def send(project: Project, key: str, n: int) -> str:
    done = project.run("send", "poisonapp:pings", json.dumps({"key": key, "n": n}))
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[-1]


def listed(project: Project, name: str) -> list[str]:
    return [x.decode() for x in project.client.lrange(name, 0, -1)]


def partitions(project: Project) -> list[dict]:
    done = project.run("status", "poisonapp:app", "--json")
    assert done.returncode == 0, done.stderr
    (proc,) = json.loads(done.stdout)["processors"]
    return proc["partitions"]


def quarantined(project: Project) -> dict[int, str]:
    return {
        p["number"]: p["failing_id"] for p in partitions(project) if p["state"] == "QUARANTINED"
    }


def test_skip_and_resume_a_quarantined_partition(poison: Project) -> None:
    with WorkerProcess("poisonapp:app", poison.dir, poison.env) as worker:
        send(poison, "k", 1)
        bad = send(poison, "k", -1)
        after = send(poison, "k", 2)
        found = wait_for(lambda: quarantined(poison))
        ((number, failing),) = found.items()
        assert failing == bad
        states = {p["number"]: p["state"] for p in partitions(poison)}
        assert states[1 - number] == "owned"
        table = poison.run("status", "poisonapp:app").stdout
        assert f"QUARANTINED at {bad}" in table

        wrong = poison.run("processor", "skip", PROC, "--partition", str(number), "--id", after)
        assert wrong.returncode != 0
        assert wrong.stderr.startswith("Error:") and len(wrong.stderr.splitlines()) == 1
        assert f"not the first pending event of partition {number}" in wrong.stderr
        assert quarantined(poison) == {number: bad}

        right = poison.run("processor", "skip", PROC, "--partition", str(number), "--id", bad)
        assert right.returncode == 0, right.stderr
        wait_for(lambda: "k:2" in listed(poison, "seen"))
        assert listed(poison, "seen") == ["k:1", "k:2"]
        assert quarantined(poison) == {}

        # Another poison event; cure it, then resume: the same event is tried again.
        again = send(poison, "k", -3)
        wait_for(lambda: quarantined(poison) == {number: again})
        poison.client.set("cured", 1)
        resumed = poison.run("processor", "resume", PROC)
        assert resumed.returncode == 0, resumed.stderr
        assert f"resumed partitions {number}" in resumed.stdout
        wait_for(lambda: "k:-3" in listed(poison, "seen"))
        assert worker.stop() == 0
    assert listed(poison, "tries") == ["k:1", "k:-1", "k:2", "k:-3", "k:-3"]
    assert "ValueError: poison -1" in worker.output
    assert poison.pending("a", count=2) == 0


def test_resume_with_nothing_quarantined_says_so(poison: Project) -> None:
    done = poison.run("processor", "resume", PROC, "--partition", "1")
    assert done.returncode == 0
    assert "not quarantined" in done.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--partition", "7", "--id", "1-0"], ["--partition 7", "0 to 1"]),
        (["--partition", "0", "--id", "soon"], ["'soon'", "not a stream id"]),
        (["--partition", "0", "--id", "1-0"], ["no pending event"]),
    ],
)
def test_skip_refuses_bad_input(poison: Project, args: list[str], words: list[str]) -> None:
    done = poison.run("processor", "skip", PROC, *args)
    assert done.returncode != 0
    assert done.stderr.startswith("Error:") and len(done.stderr.splitlines()) == 1
    for word in words:
        assert word in done.stderr


def test_reset_refuses_while_workers_run_unless_forced(poison: Project) -> None:
    with WorkerProcess("poisonapp:app", poison.dir, poison.env) as worker:
        send(poison, "k", 1)
        wait_for(lambda: listed(poison, "seen") == ["k:1"])
        refused = poison.run("processor", "reset", PROC)
        assert refused.returncode != 0
        assert refused.stderr.startswith("Error: workers of a are running:")
        assert f"pid {worker.proc.pid}" in refused.stderr
        assert len(refused.stderr.splitlines()) == 1
        forced = poison.run("processor", "reset", PROC, "--force")
        assert forced.returncode == 0, forced.stderr
        assert worker.stop() == 0
    done = poison.run("processor", "reset", PROC)
    assert done.returncode == 0, done.stderr
