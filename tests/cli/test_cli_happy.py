"""Happy paths: send, sendmany (file and stdin), worker, --processors, processor reset."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli_app import MODULE, Project, by_key, expected_by_key, jsonl, pings
from tests.support.processes import WorkerProcess, wait_for

STREAM = f"{MODULE}:pings"
APP = f"{MODULE}:app"
XID = re.compile(r"^\d+-\d+$")


def read_back(project: Project) -> list[dict[str, object]]:
    """Every event in the stream, decoded from the partition streams (order within a partition)."""
    out = []
    for key in project.partition_keys():
        for _, fields in project.client.xrange(key):
            out.append({k.decode(): v for k, v in fields.items()})
    return out


def test_send_prints_an_id(project: Project) -> None:
    done = project.run("send", STREAM, '{"key": "k1", "n": 7}')
    assert done.returncode == 0, done.stderr
    xid = done.stdout.strip()
    assert XID.match(xid), done.stdout
    assert project.stream_length() == 1
    # The printed id is the id the event got in its partition stream.
    ids = [x.decode() for key in project.partition_keys() for x, _ in project.client.xrange(key)]
    assert ids == [xid]


def test_send_and_sendmany_keep_integers_beyond_64_bits_exact(project: Project) -> None:
    """JSON input is read exactly: before, orjson read these as floats, and the record got
    the nearest float's integer (18446744073709551616 for ...617)."""
    done = project.run("send", STREAM, '{"key": "k1", "n": 18446744073709551617}')
    assert done.returncode == 0, done.stderr
    lines = (
        '{"key": "k2", "n": -9223372036854775809}\n{"key": "k3", "n": 10000000000000000000001}\n'
    )
    done = project.run("sendmany", STREAM, "-", input=lines)
    assert done.returncode == 0, done.stderr
    stored = sorted(
        (json.loads(event["data"])["key"], json.loads(event["data"])["n"])
        for event in read_back(project)
    )
    assert stored == [
        ("k1", 18446744073709551617),
        ("k2", -9223372036854775809),
        ("k3", 10000000000000000000001),
    ]


def test_sendmany_file_sends_every_line(project: Project) -> None:
    events = pings(250, keys=5)
    (project.dir / "events.jsonl").write_text(jsonl(events))
    done = project.run("sendmany", STREAM, "events.jsonl")
    assert done.returncode == 0, done.stderr
    assert project.stream_length() == 250
    assert "250" in done.stderr  # "sent 250 events to pings"
    assert len(read_back(project)) == 250


def test_sendmany_stdin_sends_every_line(project: Project) -> None:
    events = pings(120, keys=3)
    done = project.run("sendmany", STREAM, "-", input=jsonl(events))
    assert done.returncode == 0, done.stderr
    assert project.stream_length() == 120


def test_sendmany_skips_blank_lines(project: Project) -> None:
    text = '{"key": "a", "n": 1}\n\n   \n{"key": "a", "n": 2}\n'
    done = project.run("sendmany", STREAM, "-", input=text)
    assert done.returncode == 0, done.stderr
    assert project.stream_length() == 2


def test_worker_processes_everything_once_in_key_order(project: Project) -> None:
    events = pings(600, keys=7)
    (project.dir / "events.jsonl").write_text(jsonl(events))
    assert project.run("sendmany", STREAM, "events.jsonl").returncode == 0

    with WorkerProcess(APP, project.dir, project.env) as worker:
        wait_for(lambda: len(project.seen("a")) >= 600 and len(project.seen("b")) >= 600)
        worker.signal(signal.SIGTERM)
        assert worker.proc.wait(60) == 0, worker.output

    for proc in ("a", "b"):
        seen = project.seen(proc)
        assert len(seen) == 600, f"{proc}: {len(seen)} processed (duplicates?)"
        assert by_key(seen) == expected_by_key(events), proc
        assert project.pending(proc) == 0, proc


def test_sigterm_exits_zero_and_leaves_nothing_pending(project: Project) -> None:
    """SIGTERM while events are in flight: exit 0, and every processed event is acked."""
    events = pings(1500, keys=6)
    (project.dir / "events.jsonl").write_text(jsonl(events))
    assert project.run("sendmany", STREAM, "events.jsonl").returncode == 0

    env = project.env_with(TEST_DELAY="0.005")
    with WorkerProcess(APP, project.dir, env, "--processors", "a") as worker:
        wait_for(lambda: len(project.seen("a")) >= 100)
        assert worker.stop() == 0, worker.output
        processed = project.seen("a")
        assert worker.proc.returncode == 0

    assert len(processed) < 1500, "stopped too late to test an in-flight stop"
    # Events fetched ahead but never handed to the processor may stay pending (they are
    # redelivered); nothing the processor finished may.
    assert not set(project.pending_events("a")) & set(processed)
    # What was processed is a per-key prefix of what was sent, each event once.
    want = expected_by_key(events)
    for key, ns in by_key(processed).items():
        assert ns == want[key][: len(ns)], key

    # A new worker carries on exactly where the first one stopped: nothing twice.
    with WorkerProcess(APP, project.dir, env, "--processors", "a") as worker:
        wait_for(lambda: len(project.seen("a")) >= 1500)
        assert worker.stop() == 0, worker.output
    seen = project.seen("a")
    assert len(seen) == 1500
    assert by_key(seen) == want
    assert project.pending("a") == 0


def test_processors_option_runs_only_those(project: Project) -> None:
    events = pings(300, keys=4)
    assert project.run("sendmany", STREAM, "-", input=jsonl(events)).returncode == 0

    with WorkerProcess(APP, project.dir, project.env, "--processors", "a") as worker:
        wait_for(lambda: len(project.seen("a")) >= 300)
        assert worker.stop() == 0, worker.output
    assert by_key(project.seen("a")) == expected_by_key(events)
    assert project.seen("b") == []
    # Processor b never joined: it has no consumer group on any partition.
    for key in project.partition_keys():
        if project.client.exists(key):
            groups = {g["name"].decode() for g in project.client.xinfo_groups(key)}
            assert "b" not in groups, key


def test_processor_reset_reprocesses_everything(project: Project) -> None:
    events = pings(200, keys=5)
    assert project.run("sendmany", STREAM, "-", input=jsonl(events)).returncode == 0

    with WorkerProcess(APP, project.dir, project.env, "--processors", "a") as worker:
        wait_for(lambda: len(project.seen("a")) >= 200)
        assert worker.stop() == 0, worker.output
    assert len(project.seen("a")) == 200

    done = project.run("processor", "reset", f"{MODULE}:a", "--start", "0")
    assert done.returncode == 0, done.stderr
    project.client.delete("seen:a")

    with WorkerProcess(APP, project.dir, project.env, "--processors", "a") as worker:
        wait_for(lambda: len(project.seen("a")) >= 200)
        assert worker.stop() == 0, worker.output
    assert by_key(project.seen("a")) == expected_by_key(events)
    assert project.pending("a") == 0


def test_restart_without_reset_processes_nothing_again(project: Project) -> None:
    """The counterpart of reset: a plain restart does not redeliver acknowledged events."""
    events = pings(100, keys=3)
    assert project.run("sendmany", STREAM, "-", input=jsonl(events)).returncode == 0
    with WorkerProcess(APP, project.dir, project.env, "--processors", "a") as worker:
        wait_for(lambda: len(project.seen("a")) >= 100)
        assert worker.stop() == 0, worker.output

    # One more event acts as a marker: once it is processed, anything redelivered was too.
    assert project.run("send", STREAM, '{"key": "k0", "n": 100}').returncode == 0
    with WorkerProcess(APP, project.dir, project.env, "--processors", "a") as worker:
        wait_for(lambda: len(project.seen("a")) >= 101)
        assert worker.stop() == 0, worker.output
    assert by_key(project.seen("a")) == expected_by_key([*events, {"key": "k0", "n": 100}])


def test_processor_reset_to_end_skips_what_is_there(project: Project) -> None:
    first = pings(50, keys=4)
    assert project.run("sendmany", STREAM, "-", input=jsonl(first)).returncode == 0
    with WorkerProcess(APP, project.dir, project.env, "--processors", "a") as worker:
        wait_for(lambda: len(project.seen("a")) >= 50)
        assert worker.stop() == 0, worker.output

    skipped = [{"key": f"k{i % 4}", "n": i} for i in range(50, 80)]
    assert project.run("sendmany", STREAM, "-", input=jsonl(skipped)).returncode == 0
    done = project.run("processor", "reset", f"{MODULE}:a", "--start", "$")
    assert done.returncode == 0, done.stderr

    with WorkerProcess(APP, project.dir, project.env, "--processors", "a") as worker:
        # Sent once the worker is up: the marker is after the reset point.
        wait_for(lambda: project.run("send", STREAM, '{"key": "k0", "n": 80}').returncode == 0)
        wait_for(lambda: "k0:80" in project.seen("a"))
        assert worker.stop() == 0, worker.output
    assert by_key(project.seen("a")) == expected_by_key([*first, {"key": "k0", "n": 80}])


@pytest.mark.parametrize("sent", [0, 1], ids=["nothing-sent", "one-partition-written"])
def test_processor_reset_before_every_partition_exists(project: Project, sent: int) -> None:
    """Resetting a processor that never ran, on a stream not all of whose partitions exist."""
    events = pings(sent, keys=1)
    if events:
        assert project.run("sendmany", STREAM, "-", input=jsonl(events)).returncode == 0
    done = project.run("processor", "reset", f"{MODULE}:a", "--start", "0")
    assert done.returncode == 0, done.stderr
    assert "\n" not in done.stderr.strip()

    with WorkerProcess(APP, project.dir, project.env, "--processors", "a") as worker:
        wait_for(lambda: project.run("send", STREAM, '{"key": "k9", "n": 99}').returncode == 0)
        wait_for(lambda: "k9:99" in project.seen("a"))
        assert worker.stop() == 0, worker.output
    assert by_key(project.seen("a")) == expected_by_key([*events, {"key": "k9", "n": 99}])


def test_console_script_sends_and_works(project: Project) -> None:
    """The installed `runnel` script (not only `python -m runnel`) drives the same commands."""
    script = Path(sys.executable).parent / "runnel"
    done = subprocess.run(
        [str(script), "send", STREAM, '{"key": "k1", "n": 1}'],
        cwd=project.dir,
        env=project.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert XID.match(done.stdout.strip())
    assert project.stream_length() == 1


def test_status_shows_the_records_a_stream_dropped_as_sent_before(project: Project) -> None:
    """A stream with an idempotency key: a record sent again is not appended, and
    `runnel status` counts it for its stream, read by a processor or not."""
    (project.dir / "keyed.py").write_text(
        "from appmod import Ping, app, pings\n\n"
        'audits = app.stream("audits", record=Ping, partition_by="key", partition_count=2,\n'
        '                    idempotency_key="key")\n'
    )
    first = project.run("send", "keyed:audits", '{"key": "k1", "n": 1}')
    again = project.run("send", "keyed:audits", '{"key": "k1", "n": 2}')
    assert first.returncode == again.returncode == 0, again.stderr
    assert first.stdout == again.stdout  # the id of the record sent first
    assert sum(project.client.xlen(key) for key in project.partition_keys("audits", 2)) == 1

    report = json.loads(project.run("status", "keyed:app", "--json").stdout)
    assert [p["duplicates_dropped"] for p in report["processors"]] == [0, 0]
    assert [(s["name"], s["duplicates_dropped"]) for s in report["streams"]] == [("audits", 1)]
    text = project.run("status", "keyed:app").stdout
    section = text.split("\nstream audits  (no processor, 2 partitions)\n", 1)[1]
    assert section.splitlines()[0] == "  duplicates dropped: 1 (sent again, not appended twice)"
    assert "duplicates dropped" not in text.split("\nstream audits", 1)[0]


def test_status_shows_the_length_of_a_stream_no_processor_reads(project: Project) -> None:
    """Where docs/cli.md sends a user to check what a send put in: each partition's length."""
    (project.dir / "audited.py").write_text(
        "from appmod import Ping, app\n\n"
        'audits = app.stream("audits", record=Ping, partition_by="key", partition_count=3)\n'
    )
    (project.dir / "audits.jsonl").write_text(jsonl(pings(40, keys=6)))
    done = project.run("sendmany", "audited:audits", "audits.jsonl")
    assert done.returncode == 0, done.stderr
    held = [project.client.xlen(key) for key in project.partition_keys("audits", 3)]
    assert sum(held) == 40 and all(held)

    shown = project.run("status", "audited:app", "--json")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert [p["name"] for p in report["processors"]] == ["a", "b"]  # pings is read
    assert report["streams"] == [
        {
            "name": "audits",
            "duplicates_dropped": 0,
            "partitions": [{"number": n, "length": held[n]} for n in range(3)],
        }
    ]
    text = project.run("status", "audited:app")
    assert text.returncode == 0, text.stderr
    section = text.stdout.split("\nstream audits  (no processor, 3 partitions)\n", 1)[1]
    assert section.splitlines() == ["  partition   length"] + [
        f"  {n:>9}  {held[n]:>7}" for n in range(3)
    ]
