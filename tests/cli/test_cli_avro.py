"""``runnel avro schema|stored|check`` and sending/working on Avro streams, for real.

Each test writes versions of one app module (same app, same ``pings`` stream, a ``Ping``
record that changes between versions) and runs the installed ``runnel`` console script.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis

from runnel_avro import schema_fingerprint
from tests.support.cli_app import Project
from tests.support.processes import RUNNEL, WorkerProcess, wait_for

SOURCE = """
import os

import redis

from runnel import App, Record

app = App(name={app_name!r}, default_serializer={serializer!r})


class Ping(Record):
    key: str
    n: int
{extra}

pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)

_client = None


def client():
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ["TEST_RECORD_URL"])
    return _client


@app.processor(pings)
async def a(events):
    async for ping in events.records():
        client().rpush("seen:a", ping.model_dump_json())
"""

VERSIONS = {
    "v1": "",
    # Compatible (backward): a field with a default.
    "v2": "    note: str = 'none'",
    # Incompatible: a required field that v1 data lacks.
    "v3": "    priority: int",
}

V1_SCHEMA = {
    "type": "record",
    "name": "Ping",
    "fields": [{"name": "key", "type": "string"}, {"name": "n", "type": "long"}],
}


@pytest.fixture
def project(tmp_path: Path, app_name: str, redis_url: str, redis_client: redis.Redis) -> Project:
    for version, extra in VERSIONS.items():
        write_module(tmp_path, version, app_name, extra)
    write_module(tmp_path, "plain", app_name, "", serializer="json")
    return Project(dir=tmp_path, app_name=app_name, redis_url=redis_url, client=redis_client)


def write_module(
    directory: Path, module: str, app_name: str, extra: str, serializer: str = "avro"
) -> None:
    source = SOURCE.format(app_name=app_name, serializer=serializer, extra=extra)
    (directory / f"{module}.py").write_text(textwrap.dedent(source))


def runnel(
    project: Project, *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed ``runnel`` console script (``python -m runnel`` if there is none)."""
    script = Path(sys.executable).parent / "runnel"
    command = [str(script)] if script.exists() else RUNNEL
    return subprocess.run(
        [*command, *args],
        cwd=project.dir,
        env=project.env,
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_one_line_error(done: subprocess.CompletedProcess[str], *names: str) -> str:
    err = done.stderr.strip()
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert err and "\n" not in err, f"not one line on stderr:\n{done.stderr}"
    assert "Traceback" not in err
    for name in names:
        assert name in err, f"{name!r} not in: {err}"
    return err


def schemas(project: Project) -> dict[str, str]:
    raw = project.client.hgetall(f"__schm:{project.app_name}.pings")
    return {k.decode(): v.decode() for k, v in raw.items()}


def length(project: Project) -> int:
    return project.stream_length(count=2)


V1_FP = schema_fingerprint(V1_SCHEMA)


def test_schema_prints_the_derived_schema_without_touching_redis(project: Project) -> None:
    done = runnel(project, "avro", "schema", "v1:pings")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == V1_SCHEMA
    done = runnel(project, "avro", "schema", "v2:pings")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["fields"][-1] == {
        "name": "note",
        "type": "string",
        "default": "none",
    }
    assert project.client.dbsize() == 0


def test_avro_commands_refuse_a_stream_that_is_not_avro(project: Project) -> None:
    for command in ("schema", "stored", "check"):
        done = runnel(project, "avro", command, "plain:pings")
        assert_one_line_error(done, "plain:pings", "Avro")


def test_send_writes_avro_and_stored_lists_the_schema(project: Project) -> None:
    done = runnel(project, "avro", "stored", "v1:pings")
    assert done.returncode == 0, done.stderr
    assert "no schemas stored" in done.stdout and f"{project.app_name}.pings" in done.stdout

    done = runnel(project, "send", "v1:pings", '{"key": "k1", "n": 7}')
    assert done.returncode == 0, done.stderr
    xid = done.stdout.strip().encode()
    entries = [
        (x, f[b"data"])
        for key in project.partition_keys(count=2)
        for x, f in project.client.xrange(key)
    ]
    assert [x for x, _ in entries] == [xid]
    assert entries[0][1][:10] == b"\xc3\x01" + bytes.fromhex(V1_FP)
    assert list(schemas(project)) == [V1_FP]
    assert json.loads(schemas(project)[V1_FP]) == V1_SCHEMA

    done = runnel(project, "avro", "stored", "v1:pings")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{V1_FP}  Ping: key, n  (this code's)"]
    # From a newer version's point of view, the stored schema is not its own.
    done = runnel(project, "avro", "stored", "v2:pings")
    assert done.stdout.splitlines() == [f"{V1_FP}  Ping: key, n"]
    done = runnel(project, "avro", "stored", "--json", "v1:pings")
    assert json.loads(done.stdout) == {V1_FP: V1_SCHEMA}


def test_check_accepts_a_compatible_change_without_storing_it(project: Project) -> None:
    assert runnel(project, "send", "v1:pings", '{"key": "k", "n": 1}').returncode == 0
    done = runnel(project, "avro", "check", "v1:pings")
    assert done.returncode == 0, done.stderr
    assert "already stored" in done.stdout

    done = runnel(project, "avro", "check", "v2:pings")
    assert done.returncode == 0, done.stderr
    assert "compatible" in done.stdout and "backward" in done.stdout
    assert list(schemas(project)) == [V1_FP], "check stores nothing"


def test_check_refuses_an_incompatible_change_naming_the_field(project: Project) -> None:
    assert runnel(project, "send", "v1:pings", '{"key": "k", "n": 1}').returncode == 0
    done = runnel(project, "avro", "check", "v3:pings")
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Ping.priority" in lines[0] and V1_FP in lines[0]
    assert "Traceback" not in done.stderr
    assert list(schemas(project)) == [V1_FP]


def test_check_on_a_fresh_stream_passes(project: Project) -> None:
    done = runnel(project, "avro", "check", "v3:pings")
    assert done.returncode == 0, done.stderr
    assert "0 stored" in done.stdout
    assert project.client.dbsize() == 0


def test_send_with_an_incompatible_schema_is_one_line_and_sends_nothing(project: Project) -> None:
    assert runnel(project, "send", "v1:pings", '{"key": "k", "n": 1}').returncode == 0
    before = (length(project), schemas(project))

    done = runnel(project, "send", "v3:pings", '{"key": "k", "n": 2, "priority": 1}')
    assert_one_line_error(done, "Ping.priority", f"{project.app_name}.pings")
    assert done.stdout == ""
    assert (length(project), schemas(project)) == before


def test_sendmany_with_an_incompatible_schema_sends_nothing(project: Project) -> None:
    assert runnel(project, "send", "v1:pings", '{"key": "k", "n": 1}').returncode == 0
    before = (length(project), schemas(project))
    events = "".join(json.dumps({"key": f"k{i}", "n": i, "priority": 0}) + "\n" for i in range(5))
    done = runnel(project, "sendmany", "v3:pings", "-", input=events)
    assert_one_line_error(done, "Ping.priority")
    assert (length(project), schemas(project)) == before


def test_worker_of_a_newer_compatible_version_reads_older_events(project: Project) -> None:
    lines = "".join(json.dumps({"key": f"k{i % 3}", "n": i}) + "\n" for i in range(30))
    sent = runnel(project, "sendmany", "v1:pings", "-", input=lines)
    assert sent.returncode == 0, sent.stderr

    with WorkerProcess("v2:app", project.dir, project.env) as worker:
        wait_for(lambda: len(project.seen("a")) >= 30)
        assert worker.stop() == 0, worker.output
    seen = [json.loads(s) for s in project.seen("a")]
    assert len(seen) == 30
    assert all(s["note"] == "none" for s in seen), "the added field gets its default"
    for key in ("k0", "k1", "k2"):
        assert [s["n"] for s in seen if s["key"] == key] == list(range(int(key[1]), 30, 3))


def test_worker_with_an_incompatible_reader_exits_1_naming_the_field(project: Project) -> None:
    assert runnel(project, "send", "v1:pings", '{"key": "k", "n": 1}').returncode == 0
    with WorkerProcess("v3:app", project.dir, project.env) as worker:
        code = worker.proc.wait(60)
        output = worker.output
    assert code == 1, output
    refusals = [line for line in output.splitlines() if "cannot start" in line]
    assert len(refusals) == 1, output
    assert "Ping.priority" in refusals[0]
    assert "Traceback" not in output
    assert project.seen("a") == []


def test_worker_halts_gracefully_on_an_undecodable_avro_entry(project: Project) -> None:
    """Default HALT policy: exit 1 after a clean stop (not a crash); the entry stays pending."""
    assert runnel(project, "send", "v1:pings", '{"key": "k", "n": 1}').returncode == 0
    [key] = [k for k in project.partition_keys(count=2) if project.client.exists(k)]
    bad = project.client.xadd(key, {b"data": b"\xc3\x01" + b"\xee" * 8 + b"\x00"})
    with WorkerProcess("v1:app", project.dir, project.env) as worker:
        code = worker.proc.wait(60)
        output = worker.output
    assert code == 1, output
    assert "eeeeeeeeeeeeeeee" in output, "the unknown fingerprint is named"
    assert "crashed" not in output
    assert [json.loads(s)["n"] for s in project.seen("a")] == [1]
    pending = project.client.xpending_range(key, "a", "-", "+", 10)
    assert [p["message_id"] for p in pending] == [bad]


@pytest.mark.parametrize(
    "args",
    [
        ("send", "v2:pings", '{"key": "k", "n": 2}'),
        ("avro", "check", "v2:pings"),
        ("avro", "stored", "v1:pings"),
    ],
    ids=["send-new-schema", "check", "stored"],
)
def test_a_damaged_stored_schema_gives_no_traceback(
    project: Project, args: tuple[str, ...]
) -> None:
    assert runnel(project, "send", "v1:pings", '{"key": "k", "n": 1}').returncode == 0
    project.client.hset(f"__schm:{project.app_name}.pings", "00112233445566ff", "{not json")
    done = runnel(project, *args)
    assert "Traceback" not in done.stderr, done.stderr
