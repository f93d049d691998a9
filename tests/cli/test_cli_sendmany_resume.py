"""`runnel sendmany` run again after it was cut short (Ctrl-C, kill -9, a lost connection)
appends exactly the lines not yet in, and says how many it skipped: each line carries its
number under a producer named after the input's content (or, with ``--key-field``, its
record's key). Without identities (``--no-identity``) the same runs store lines twice.

Each test that stops a run has a redis-server of its own, paused (SIGSTOP) once a chunk
is in and the next is written, so the run cannot finish before it is stopped, and so
that what the server holds can be counted once the stopped run's connection is gone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import redis

from tests.cli.test_cli_errors import unread_by_server
from tests.support.cli_app import MODULE, Project, by_key, expected_by_key, jsonl, pings
from tests.support.ports import start_redis
from tests.support.processes import RUNNEL, wait_for
from tests.support.proxy import Proxy

STREAM = f"{MODULE}:pings"
TOTAL = 100_000
EVENTS = pings(TOTAL, keys=7)


def stored(client: redis.Redis, project: Project) -> list[str]:
    """Every entry of the stream, as ``"key:n"``, partition by partition in order."""
    out = []
    for key in project.partition_keys():
        for _, fields in client.xrange(key):
            data = json.loads(fields[b"data"])
            out.append(f"{data['key']}:{data['n']}")
    return out


def assert_each_line_once(client: redis.Redis, project: Project) -> None:
    """Every event once, and each key's events in the file's order."""
    got = stored(client, project)
    assert len(got) == TOTAL
    assert by_key(got) == expected_by_key(EVENTS)


class CutShort:
    """`runnel sendmany` of EVENTS to a server of its own, paused once the first chunk is
    in and another is written; the run is then sent ``sig``, the server resumed, and what
    it holds counted (``self.stored``) once the run's connection is gone."""

    def __init__(self, project: Project, directory: Path, sig: int, *options: str) -> None:
        self.server = start_redis(directory, persist=False)
        self.project = project
        self.options = options
        self.env = project.env_with(RUNNEL_REDIS_URL=self.server.url)
        self.client = redis.Redis(port=self.server.port)
        (project.dir / "many.jsonl").write_text(jsonl(EVENTS))
        proc = subprocess.Popen(
            [*RUNNEL, "sendmany", STREAM, "many.jsonl", *options],
            cwd=project.dir,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            keys = project.partition_keys()
            wait_for(lambda: sum(map(self.client.xlen, keys)) >= 1000, interval=0.01)
            os.kill(self.server.pid, signal.SIGSTOP)
            wait_for(lambda: unread_by_server(self.server.port) > 0, interval=0.01)
            proc.send_signal(sig)
            _, self.err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
            os.kill(self.server.pid, signal.SIGCONT)
        self.returncode = proc.returncode
        wait_for(lambda: len(self.client.client_list()) == 1)
        self.stored = len(stored(self.client, project))
        assert 1000 <= self.stored < TOTAL

    def again(self, *options: str) -> subprocess.CompletedProcess[str]:
        return self.project.run("sendmany", STREAM, "many.jsonl", *options, env=self.env)

    def close(self) -> None:
        self.client.close()
        os.kill(self.server.pid, signal.SIGTERM)


def test_run_again_after_ctrl_c_sends_each_line_once(project: Project, tmp_path: Path) -> None:
    """Ctrl-C with a chunk unanswered (named in doubt); the server then runs it. Run
    again, the rest goes in, the lines in already are skipped and counted."""
    first = CutShort(project, tmp_path / "redis", signal.SIGINT)
    try:
        assert first.returncode == 1
        assert "may or may not be in Redis" in first.err, first.err
        done = first.again()
        assert (done.returncode, done.stderr) == (
            0,
            f"sent {TOTAL - first.stored} events to pings, skipped {first.stored} already sent\n",
        )
        assert_each_line_once(first.client, project)
        # Once more: every line is in, nothing is sent.
        done = first.again()
        assert done.stderr == f"sent 0 events to pings, skipped {TOTAL} already sent\n"
        assert len(stored(first.client, project)) == TOTAL
    finally:
        first.close()


def test_run_again_after_kill_9_sends_each_line_once(project: Project, tmp_path: Path) -> None:
    first = CutShort(project, tmp_path / "redis", signal.SIGKILL)
    try:
        assert first.returncode == -signal.SIGKILL
        done = first.again()
        assert (done.returncode, done.stderr) == (
            0,
            f"sent {TOTAL - first.stored} events to pings, skipped {first.stored} already sent\n",
        )
        assert_each_line_once(first.client, project)
    finally:
        first.close()


def test_standard_input_is_known_by_its_content_too(project: Project, tmp_path: Path) -> None:
    """Standard input is read whole before anything is sent, so the same content piped
    again is the same producer: only the rest is sent."""
    first = CutShort(project, tmp_path / "redis", signal.SIGKILL)
    try:
        done = project.run("sendmany", STREAM, "-", input=jsonl(EVENTS), env=first.env)
        assert done.stderr == (
            f"sent {TOTAL - first.stored} events to pings, skipped {first.stored} already sent\n"
        )
        assert_each_line_once(first.client, project)
    finally:
        first.close()


def test_without_identities_run_again_sends_lines_twice(project: Project, tmp_path: Path) -> None:
    """The same runs with --no-identity: what the first run stored is stored again."""
    first = CutShort(project, tmp_path / "redis", signal.SIGKILL, "--no-identity")
    try:
        done = first.again("--no-identity")
        assert (done.returncode, done.stderr) == (0, f"sent {TOTAL} events to pings\n")
        assert len(stored(first.client, project)) == TOTAL + first.stored
    finally:
        first.close()


def test_run_again_after_a_lost_connection_sends_each_line_once(project: Project) -> None:
    """The connection drops with a chunk's reply in flight (Redis ran it) and no try is
    left: the run names the chunk in doubt; run again, it is skipped with the others."""
    events = pings(5000, keys=7)
    events[2500]["key"] = "marker"  # line 2501, in the third chunk
    (project.dir / "five.jsonl").write_text(jsonl(events))
    proxy = Proxy("127.0.0.1", int(project.redis_url.rsplit(":", 1)[1].split("/")[0]))
    try:
        proxy.arm(b'"marker"')
        env = project.env_with(RUNNEL_REDIS_URL=proxy.url, RUNNEL_SEND_RETRIES="0")
        done = project.run("sendmany", STREAM, "five.jsonl", env=env)
        assert proxy.dropped.is_set()
    finally:
        proxy.close()
    assert done.returncode == 1
    assert done.stderr.startswith(
        "Error: sending failed after 2000 of 5000 events; no reply came for lines 2001 to "
        "3000, so they may or may not be in Redis (the first line surely unsent is line 3001)"
    ), done.stderr
    assert project.stream_length() == 3000  # the chunk in doubt went in
    done = project.run("sendmany", STREAM, "five.jsonl")
    assert (done.returncode, done.stderr) == (
        0,
        "sent 2000 events to pings, skipped 3000 already sent\n",
    )
    assert by_key(stored(project.client, project)) == expected_by_key(events)


def test_key_field_appends_a_key_once(project: Project) -> None:
    """Lines with a key seen before (in the file, or in the stream) are skipped; without
    the option, the same lines are appended as lines of their own."""
    events = pings(100, keys=7)
    (project.dir / "dups.jsonl").write_text(jsonl(events + events[:30]))
    done = project.run("sendmany", STREAM, "dups.jsonl", "--key-field", "n")
    assert (done.returncode, done.stderr) == (
        0,
        "sent 100 events to pings, skipped 30 already sent\n",
    )
    assert by_key(stored(project.client, project)) == expected_by_key(events)
    done = project.run("sendmany", STREAM, "dups.jsonl", "--key-field", "n")
    assert done.stderr == "sent 0 events to pings, skipped 130 already sent\n"
    assert project.stream_length() == 100
    done = project.run("sendmany", STREAM, "dups.jsonl", "--no-identity")
    assert done.stderr == "sent 130 events to pings\n"
    assert project.stream_length() == 230


KEYED = """
from appmod import app
from runnel import Record


class Order(Record):
    ref: str | None = None
    n: int


orders = app.stream("orders", record=Order, partition_by="n", partition_count=2)
"""


def test_key_field_errors_send_nothing(project: Project) -> None:
    """A field the record does not have, or a line without a value for it: one Error
    line, exit 1, nothing sent; with --no-identity: a usage error."""
    (project.dir / "keyed.py").write_text(KEYED)
    (project.dir / "fine.jsonl").write_text(jsonl(pings(5, keys=2)))
    done = project.run("sendmany", STREAM, "fine.jsonl", "--key-field", "nope")
    assert (done.returncode, done.stderr) == (
        1,
        "Error: --key-field 'nope': Ping has no such field (its fields: key, n)\n",
    )
    done = project.run("sendmany", STREAM, "fine.jsonl", "--key-field", "n", "--no-identity")
    assert done.returncode == 2
    assert "Error: --key-field and --no-identity cannot go together" in done.stderr
    for line, said in (('{"n": 2}', "missing"), ('{"ref": null, "n": 2}', "null")):
        (project.dir / "orders.jsonl").write_text(f'{{"ref": "a", "n": 1}}\n{line}\n')
        done = project.run("sendmany", "keyed:orders", "orders.jsonl", "--key-field", "ref")
        assert (done.returncode, done.stderr) == (
            1,
            f"Error: line 2: ref, the field that tells lines sent before, is {said}\n",
        )
    assert project.client.dbsize() == 0
    done = project.run("sendmany", "keyed:orders", "orders.jsonl")  # by line: no key needed
    assert (done.returncode, done.stderr) == (0, "sent 2 events to orders\n")


def test_an_input_changed_since_is_sent_whole(project: Project) -> None:
    """Lines are known by their place in one content: another content (a line added)
    is another producer, whose lines are all sent."""
    (project.dir / "some.jsonl").write_text(jsonl(pings(10, keys=3)))
    project.run("sendmany", STREAM, "some.jsonl")
    (project.dir / "some.jsonl").write_text(jsonl(pings(12, keys=3)))
    done = project.run("sendmany", STREAM, "some.jsonl")
    assert (done.returncode, done.stderr) == (0, "sent 12 events to pings\n")
    assert project.stream_length() == 22
