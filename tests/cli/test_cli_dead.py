"""`runnel dead list|replay|purge MODULE:STREAM`: the dead letters a real worker forwarded."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.support.cli_app import Project
from tests.support.processes import WorkerProcess, cli_on_terminal, wait_for

DEAD_APP = """
import os

import redis

from runnel import App, Record
from runnel.middleware.dead_letter import DeadLetterMiddleware

app = App(name={name!r})


class Ping(Record):
    key: str
    n: int


pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
_client = redis.Redis.from_url(os.environ["TEST_RECORD_URL"])


@app.processor(pings, exception_policy="ignore", middleware=[DeadLetterMiddleware(pings)])
async def a(events):
    async for ping in events.records():
        if ping.n < 0:
            raise (KeyError if ping.n == -1 else ValueError)(f"bad {{ping.n}}")
        _client.rpush("seen", f"{{ping.key}}:{{ping.n}}")
"""

STREAM = "deadapp:pings"


@pytest.fixture
def dead(project: Project) -> dict[str, object]:
    """Four dead letters (n = -1..-4) over two keys in distinct partitions, by a worker."""
    (project.dir / "deadapp.py").write_text(textwrap.dedent(DEAD_APP.format(name=project.app_name)))
    keys = ["a", "b"]
    lines = "".join(json.dumps({"key": keys[i % 2], "n": -1 - i}) + "\n" for i in range(4))
    lines += json.dumps({"key": "a", "n": 1}) + "\n"
    sent = project.run("sendmany", STREAM, "-", input=lines)
    assert sent.returncode == 0, sent.stderr
    sink = f"__strm:{project.app_name}.dead.pings.0"
    with WorkerProcess("deadapp:app", project.dir, project.env) as worker:
        wait_for(lambda: project.client.xlen(sink) == 4 and project.client.llen("seen") == 1)
        assert worker.stop() == 0
    partitions = {}
    originals = {}
    for number in range(2):
        for xid, fields in project.client.xrange(f"__strm:{project.app_name}.pings.{number}"):
            ping = json.loads(fields[b"data"])
            partitions[ping["key"]] = number
            originals[number, xid.decode()] = fields  # ids repeat across partitions
    return {"project": project, "sink": sink, "partitions": partitions, "originals": originals}


def listed(project: Project, *args: str) -> list[str]:
    done = project.run("dead", "list", STREAM, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_list_and_its_filters(dead: dict) -> None:
    project, partitions = dead["project"], dead["partitions"]
    lines = listed(project)
    assert len(lines) == 4
    assert sum("KeyError" in line for line in lines) == 1
    assert len(listed(project, "--error", "valueerror")) == 3
    assert len(listed(project, "--error", "bad -2")) == 1
    for key in "ab":
        only = listed(project, "--partition", str(partitions[key]))
        assert len(only) == 2 and all(f"partition {partitions[key]} " in x for x in only)
    assert listed(project, "--since", "2999-01-01") == []
    assert len(listed(project, "--since", "1h", "--until", "2999-01-01T00:00:00+00:00")) == 4


def test_replay_sends_the_stored_bytes_back_and_empties_the_sink(dead: dict) -> None:
    project, originals = dead["project"], dead["originals"]
    app = project.app_name
    before = {n: project.client.xlen(f"__strm:{app}.pings.{n}") for n in range(2)}
    failed = [line.split() for line in listed(project, "--error", "ValueError")]
    failed_ids = [(int(parts[2]), parts[4]) for parts in failed]
    done = project.run("dead", "replay", STREAM, "--error", "ValueError")
    assert done.returncode == 0, done.stderr
    assert "replayed 3 dead letters" in done.stdout
    assert len(listed(project)) == 1, "only the replayed ones leave the sink"
    replayed = []
    for number in range(2):
        entries = project.client.xrange(f"__strm:{app}.pings.{number}")
        for _, fields in entries[before[number] :]:
            replayed.append(fields)
            assert json.loads(fields[b"data"])["key"] == (
                "a" if number == dead["partitions"]["a"] else "b"
            )
    assert sorted(f[b"data"] for f in replayed) == sorted(originals[i][b"data"] for i in failed_ids)
    assert all(set(f) == {b"data"} for f in replayed)


def test_purge_asks_first_and_deletes_only_what_is_chosen(dead: dict) -> None:
    project, sink = dead["project"], dead["sink"]
    asked = "delete 4 dead letters of pings for good?"
    refused = on_terminal(project, "dead", "purge", STREAM, answer="n\n")
    assert refused == (1, "", f"{asked} [y/N]: Error: nothing purged\n")
    # Standard input not a terminal (< /dev/null), or ended: one line naming --yes.
    no_answer = "give --yes to purge without being asked"
    no_terminal = project.run("dead", "purge", STREAM, input="")
    assert (no_terminal.returncode, no_terminal.stdout) == (1, "")
    assert no_terminal.stderr == (
        f'Error: "{asked}" needs an answer and standard input is not a terminal: {no_answer}\n'
    )
    ended = on_terminal(project, "dead", "purge", STREAM, answer="\x04")
    assert ended == (1, "", f'{asked} [y/N]: \nError: "{asked}" got no answer: {no_answer}\n')
    assert project.client.xlen(sink) == 4
    done = project.run("dead", "purge", STREAM, "--error", "KeyError", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "purged 1 dead letter of pings\n"  # not "1 dead letters"
    assert project.client.xlen(sink) == 3
    confirmed = on_terminal(project, "dead", "purge", STREAM, answer="y\n")
    assert confirmed[0] == 0, confirmed
    assert project.client.xlen(sink) == 0


def on_terminal(project: Project, *args: str, answer: str) -> tuple[int, str, str]:
    return cli_on_terminal(*args, cwd=project.dir, env=project.env, answer=answer)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--since", "yesterday"], ["'yesterday'", "30m"]),
        (["--partition", "5"], ["--partition 5", "0 to 1"]),
    ],
)
def test_bad_filters_are_one_error_line(
    project: Project, args: list[str], words: list[str]
) -> None:
    (project.dir / "deadapp.py").write_text(textwrap.dedent(DEAD_APP.format(name=project.app_name)))
    done = project.run("dead", "list", STREAM, *args)
    assert done.returncode != 0
    assert done.stderr.startswith("Error:") and len(done.stderr.splitlines()) == 1
    for word in words:
        assert word in done.stderr


def test_each_command_takes_yes(dead: dict) -> None:
    """API.md gives `[--yes]` for list, replay and purge: one command line fits all three.
    Only purge asks, so --yes changes nothing for the other two."""
    project, sink = dead["project"], dead["sink"]
    assert len(listed(project, "--yes")) == 4
    done = project.run("dead", "replay", STREAM, "--error", "KeyError", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "replayed 1 dead letter to pings\n"
    assert project.client.xlen(sink) == 3
    done = project.run("dead", "purge", STREAM, "--yes")
    assert done.returncode == 0, done.stderr
    assert project.client.xlen(sink) == 0
