"""The stream actions of a real `runnel dashboard --allow-actions` process, through HTTP
as the page's buttons post them: a stream's dead letters (forwarded by a real worker)
replayed and purged, and a quarantined partition skipped and resumed; a target that is
not there changes nothing."""

from __future__ import annotations

import json
import textwrap
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.cli_app import Project
from tests.support.dashboard import Dashboard
from tests.support.processes import WorkerProcess, wait_for

APP = """
import os

import redis

from runnel import App, Record
from runnel.middleware.dead_letter import DeadLetterMiddleware

app = App(name={name!r})


class Ping(Record):
    key: str
    n: int


pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
pokes = app.stream("pokes", record=Ping, partition_by="key", partition_count=2)
_client = redis.Redis.from_url(os.environ["TEST_RECORD_URL"])


@app.processor(pings, exception_policy="ignore", middleware=[DeadLetterMiddleware(pings)])
async def a(events):
    async for ping in events.records():
        if ping.n < 0 and not _client.exists("cured"):
            raise ValueError(f"bad {{ping.n}}")
        _client.rpush("seen", f"{{ping.key}}:{{ping.n}}")


@app.processor(pokes, exception_policy="quarantine")
async def q(events):
    async for poke in events.records():
        if poke.n < 0 and not _client.exists("cured"):
            raise ValueError(f"poison {{poke.n}}")
        _client.rpush("poked", f"{{poke.key}}:{{poke.n}}")
"""


@pytest.fixture
def project(tmp_path: Path, app_name: str, redis_url: str, redis_client: redis.Redis) -> Project:
    (tmp_path / "streamapp.py").write_text(textwrap.dedent(APP.format(name=app_name)))
    return Project(dir=tmp_path, app_name=app_name, redis_url=redis_url, client=redis_client)


def send(project: Project, stream: str, key: str, n: int) -> str:
    done = project.run("send", f"streamapp:{stream}", json.dumps({"key": key, "n": n}))
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[-1]


class Page:
    """The dashboard's action endpoint, as the page's buttons call it."""

    def __init__(self, board: Dashboard) -> None:
        self.url = board.url
        with urllib.request.urlopen(self.url, timeout=30) as answer:
            text = answer.read().decode()
        self.token = text.split('name="runnel-token" content="')[1].split('"')[0]

    def act(self, name: str, args: dict[str, Any]) -> tuple[int, str]:
        sent = urllib.request.Request(
            self.url + f"api/actions/{name}",
            data=json.dumps(args).encode(),
            headers={"Content-Type": "application/json", "X-Runnel-Token": self.token},
        )
        try:
            with urllib.request.urlopen(sent, timeout=60) as answer:
                return answer.status, json.loads(answer.read())["message"]
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())["error"]


def test_stream_dead_letters_replayed_and_purged(project: Project, tmp_path: Path) -> None:
    client, name = project.client, project.app_name
    sink = f"__strm:{name}.dead.pings.0"
    with WorkerProcess("streamapp:app", tmp_path, project.env) as worker:
        for key, n in (("a", -1), ("b", -2), ("a", -3)):
            send(project, "pings", key, n)
        wait_for(lambda: client.xlen(sink) == 3)
        assert worker.stop() == 0
    first, second, third = [xid.decode() for xid, _ in client.xrange(sink)]
    stored = sum(client.xlen(f"__strm:{name}.pings.{n}") for n in range(2))
    audit = tmp_path / "audit.jsonl"
    board = Dashboard(
        "streamapp:app", tmp_path, project.env, "--allow-actions", "--audit-log", str(audit)
    )
    try:
        page = Page(board)
        args: dict[str, Any] = {"stream": "pings", "partition": None}
        # Nothing there: refused, nothing changed.
        assert page.act("stream-dead-purge", {**args, "ids": [first, "1-1"]}) == (
            404,
            "no dead letter '1-1' of stream pings",
        )
        code, said = page.act("stream-dead-replay", {**args, "partition": 9, "ids": [first]})
        assert code == 404 and "pings has partitions 0 to 1" in said
        assert page.act("stream-dead-replay", {"stream": "nope", "ids": [first]})[0] == 404
        assert page.act("stream-dead-replay", {**args, "ids": []})[0] == 400
        assert client.xlen(sink) == 3

        assert page.act("stream-dead-purge", {**args, "ids": [first]}) == (
            200,
            "purged 1 dead letter of pings",
        )
        assert [x.decode() for x, _ in client.xrange(sink)] == [second, third]
        assert page.act("stream-dead-replay", {**args, "ids": [second]}) == (
            200,
            "replayed 1 dead letter of pings",
        )
        assert [x.decode() for x, _ in client.xrange(sink)] == [third]
        assert sum(client.xlen(f"__strm:{name}.pings.{n}") for n in range(2)) == stored + 1
        # Without ids: every dead letter of the stream (or of the partition given).
        assert page.act("stream-dead-replay", args) == (200, "replayed 1 dead letter of pings")
        assert client.xlen(sink) == 0
    finally:
        board.close()
    # The replayed events run again, now cured.
    client.set("cured", 1)
    with WorkerProcess("streamapp:app", tmp_path, project.env) as worker:
        wait_for(
            lambda: sorted(x.decode() for x in client.lrange("seen", 0, -1)) == ["a:-3", "b:-2"]
        )
        assert worker.stop() == 0
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [(x["action"], x["outcome"]) for x in lines] == [
        ("stream-dead-purge", "refused"),
        ("stream-dead-replay", "refused"),
        ("stream-dead-replay", "refused"),
        ("stream-dead-replay", "refused"),
        ("stream-dead-purge", "done"),
        ("stream-dead-replay", "done"),
        ("stream-dead-replay", "done"),
    ]


def quarantined(project: Project) -> dict[int, str]:
    done = project.run("status", "streamapp:app", "--json")
    assert done.returncode == 0, done.stderr
    [proc] = [p for p in json.loads(done.stdout)["processors"] if p["name"] == "q"]
    return {p["number"]: p["failing_id"] for p in proc["partitions"] if p["state"] == "QUARANTINED"}


def test_a_quarantined_partition_skipped_and_resumed(project: Project, tmp_path: Path) -> None:
    client = project.client
    board = Dashboard("streamapp:app", tmp_path, project.env, "--allow-actions")
    try:
        page = Page(board)
        with WorkerProcess("streamapp:app", tmp_path, project.env) as worker:
            send(project, "pokes", "k", 1)
            bad = send(project, "pokes", "k", -1)
            send(project, "pokes", "k", 2)
            [(number, failing)] = wait_for(lambda: quarantined(project)).items()
            assert failing == bad
            target = {"processor": "q", "stream": "pokes", "partition": number}
            assert page.act("partition-resume", {**target, "partition": 1 - number}) == (
                409,
                f"partition {1 - number} of q is not quarantined",
            )
            assert page.act("partition-skip", {**target, "processor": "nope"})[0] == 404
            code, said = page.act("partition-skip", {**target, "id": "1-1"})
            assert code == 409 and "nothing skipped" in said
            assert quarantined(project) == {number: bad}

            assert page.act("partition-skip", target) == (
                200,
                f"skipped {bad} on partition {number} of q; the partition resumes",
            )
            wait_for(lambda: b"k:2" in client.lrange("poked", 0, -1))
            assert quarantined(project) == {}

            again = send(project, "pokes", "k", -3)
            wait_for(lambda: quarantined(project) == {number: again})
            client.set("cured", 1)
            assert page.act("partition-resume", target) == (
                200,
                f"resumed partition {number} of q",
            )
            wait_for(lambda: b"k:-3" in client.lrange("poked", 0, -1))
            assert worker.stop() == 0
    finally:
        board.close()
    assert [x.decode() for x in client.lrange("poked", 0, -1)] == ["k:1", "k:2", "k:-3"]
