"""The real command line on a Redis Cluster: sendmany (and run again after kill -9), two
`runnel worker` processes sharing the partitions, and `runnel status` naming the key
layout."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import redis
from redis.cluster import RedisCluster as SyncCluster

from runnel import App, Record
from tests.support.cli_app import by_key, expected_by_key, jsonl, pings, write_app
from tests.support.processes import RUNNEL, WorkerProcess, cli, env_with
from tests.support.redis_cluster import RedisClusterProcesses

HANG_GUARD = 120.0


class Ping(Record):  # as the app module's
    key: str
    n: int


def until(check, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + HANG_GUARD  # only bounds a hung test
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.1)


def test_two_worker_processes_and_status_on_a_cluster(
    redis_cluster: RedisClusterProcesses, redis_url: str, tmp_path: Path
) -> None:
    app_name = f"c{uuid.uuid4().hex[:8]}"
    write_app(tmp_path, app_name, partitions=6)
    # The processors record what they saw in a plain single Redis (TEST_RECORD_URL).
    env = env_with(redis_cluster.url, TEST_RECORD_URL=redis_url)
    record = redis.Redis.from_url(redis_url)
    events = pings(60, 7)
    sent = cli("sendmany", "appmod:pings", "-", cwd=tmp_path, env=env, input=jsonl(events))
    assert sent.returncode == 0, sent.stderr

    def seen(processor: str) -> list[str]:
        return [x.decode() for x in record.lrange(f"seen:{processor}", 0, -1)]

    with (
        WorkerProcess("appmod:app", tmp_path, env) as one,
        WorkerProcess("appmod:app", tmp_path, env) as two,
    ):

        def report() -> dict:  # type: ignore[type-arg]
            done = cli("status", "appmod:app", "--json", cwd=tmp_path, env=env)
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)

        def both_working() -> bool:
            procs = report()["processors"]
            return all(len([e for e in p["executors"] if e["alive"]]) == 2 for p in procs)

        until(both_working, "both workers joined every processor")
        until(lambda: len(seen("a")) >= 60 and len(seen("b")) >= 60, "every event processed")
        status = report()
        assert status["key_layout"] == "cluster"
        for proc in status["processors"]:
            owners = {p["owner"] for p in proc["partitions"]}
            assert len(owners) == 2 and None not in owners, "the two workers share them"
        text = cli("status", "appmod:app", cwd=tmp_path, env=env)
        assert "key layout: cluster" in text.stdout
        assert one.stop() == 0, one.output
        assert two.stop() == 0, two.output
    for processor in ("a", "b"):
        assert by_key(seen(processor)) == expected_by_key(events)
    record.close()


def test_sendmany_run_again_after_kill_9_sends_each_line_once(
    redis_cluster: RedisClusterProcesses, tmp_path: Path
) -> None:
    """Killed mid-file (a chunk's parts may be in on some masters only), run again: each
    partition skips the lines it holds; every line is stored once, in order per key."""
    app_name = f"c{uuid.uuid4().hex[:8]}"
    write_app(tmp_path, app_name, partitions=6)
    env = env_with(redis_cluster.url, TEST_RECORD_URL=redis_cluster.url)
    total = 60_000
    events = pings(total, 7)
    (tmp_path / "many.jsonl").write_text(jsonl(events))
    app = App(name=app_name, redis_url=redis_cluster.url)
    declared = app.stream("pings", record=Ping, partition_by="key", partition_count=6)
    keys = [p.key for p in declared.partitions]
    client = SyncCluster.from_url(redis_cluster.redis_url)

    def stored() -> list[str]:
        out = []
        for key in keys:
            for _, fields in client.xrange(key):
                data = json.loads(fields[b"data"])
                out.append(f"{data['key']}:{data['n']}")
        return out

    proc = subprocess.Popen(
        [*RUNNEL, "sendmany", "appmod:pings", "many.jsonl"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        until(lambda: sum(map(client.xlen, keys)) >= 1000, "a chunk is in")
        proc.kill()
        assert proc.wait(HANG_GUARD) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
    done = cli("sendmany", "appmod:pings", "many.jsonl", cwd=tmp_path, env=env)
    found = re.fullmatch(r"sent (\d+) events to pings, skipped (\d+) already sent\n", done.stderr)
    assert done.returncode == 0 and found, done.stderr
    assert int(found.group(1)) + int(found.group(2)) == total
    assert 1000 <= int(found.group(2)) < total
    got = stored()
    assert len(got) == total
    assert by_key(got) == expected_by_key(events)
    client.close()
