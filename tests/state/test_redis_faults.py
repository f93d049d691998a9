"""Tables when Redis itself fails, with real worker processes and a redis-server of the
test's own: killed (SIGKILL, AOF ``everysec``) or shut down mid-run and started again, its
tables and acknowledgements agree (whatever the restart lost, it lost both); full
(``maxmemory``, ``noeviction``), it refuses commits whole, the worker says so in one line
and goes on once memory frees."""

from __future__ import annotations

import json
import random
import subprocess
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.ports import free_port
from tests.support.processes import WorkerProcess, cli, env_with, wait_for

EVENTS = 6000
KEYS = 40
PARTITIONS = 4

APP = """
import asyncio
import time

from runnel import App, Record

app = App(name={name!r})


class Hit(Record):
    key: str
    n: int


hits = app.stream("hits", record=Hit, partition_by="key", partition_count={partitions})
counts = app.table("counts", source=hits, default=0)


@app.processor(hits)
async def count(events):
    async for hit in events.records():
        counts[hit.key] += 1
        time.sleep({pause})
        await asyncio.sleep(0)
"""


class OwnRedis:
    """A redis-server this test may kill and start again on the same port and files."""

    def __init__(self, directory: Path, *extra: str) -> None:
        self.directory = directory
        self.port = free_port()
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--save",
                "",
                *self.extra,
            ],
            stdout=subprocess.DEVNULL,
        )

        def up() -> bool:
            try:
                with self.client() as c:
                    return bool(c.ping()) and c.info("persistence")["loading"] == 0
            except redis.exceptions.RedisError:
                return False

        wait_for(up, timeout=60)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(30)

    def shutdown(self) -> None:
        with self.client() as c:
            try:
                c.shutdown()
            except redis.exceptions.ConnectionError:
                pass
        assert self.proc is not None
        self.proc.wait(30)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture
def aof_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    (tmp_path / "aof").mkdir()
    server = OwnRedis(tmp_path / "aof", "--appendonly", "yes", "--appendfsync", "everysec")
    yield server
    server.close()


def _write(tmp_path: Path, app_name: str, pause: float) -> dict[str, int]:
    (tmp_path / "hitapp.py").write_text(
        textwrap.dedent(APP.format(name=app_name, partitions=PARTITIONS, pause=pause))
    )
    rng = random.Random(5)
    sent = [f"k{rng.randrange(KEYS)}" for _ in range(EVENTS)]
    (tmp_path / "hits.jsonl").write_text(
        "".join(json.dumps({"key": k, "n": n}) + "\n" for n, k in enumerate(sent))
    )
    return dict(Counter(sent))


def _progress(client: redis.Redis, app_name: str) -> tuple[int, int]:
    """Entries acknowledged, and entries still to acknowledge, over the partitions."""
    done = left = 0
    for n in range(PARTITIONS):
        key = f"__strm:{app_name}.hits.{n}"
        if not client.exists(key):
            continue
        length = int(client.xlen(key))
        for group in client.xinfo_groups(key):
            last = group["last-delivered-id"]
            read = len(client.xrange(key, "-", last)) if last != b"0-0" else 0
            done += read - int(group["pending"])
            left += length - read + int(group["pending"])
    return done, left


def _stored_by_key(client: redis.Redis, app_name: str) -> dict[str, int]:
    """Per key, the events the stream holds (what Redis kept)."""
    found: Counter[str] = Counter()
    for n in range(PARTITIONS):
        for _, fields in client.xrange(f"__strm:{app_name}.hits.{n}"):
            data = fields.get(b"data") or next(iter(fields.values()))
            found[json.loads(data)["key"]] += 1
    return dict(found)


def _table(tmp_path: Path, env: dict[str, str]) -> dict[str, int]:
    dumped = cli("table", "dump", "hitapp:counts", "--json", cwd=tmp_path, env=env)
    assert dumped.returncode == 0, dumped.stderr
    return {e["key"]: e["value"] for e in map(json.loads, dumped.stdout.splitlines())}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("how", ["SIGKILL", "SHUTDOWN"])
def test_state_and_acknowledgements_agree_after_redis_restarts(
    tmp_path: Path, aof_redis: OwnRedis, app_name: str, how: str
) -> None:
    expected = _write(tmp_path, app_name, pause=0.001)
    env = env_with(aof_redis.url, RUNNEL_DEFAULT_LOCK_EXPIRY="3")
    assert cli("sendmany", "hitapp:hits", "hits.jsonl", cwd=tmp_path, env=env).returncode == 0
    client = aof_redis.client()
    assert _stored_by_key(client, app_name) == expected
    time.sleep(1.5)  # the events are on disk (fsync every second) before anything else
    workers = [WorkerProcess("hitapp:app", tmp_path, env) for _ in range(2)]
    try:
        wait_for(lambda: _progress(client, app_name)[0] > EVENTS // 3, timeout=120)
        if how == "SIGKILL":
            aof_redis.kill()  # the last second of commits may be lost: acks and state alike
        else:
            aof_redis.shutdown()
        client.close()
        time.sleep(1)
        aof_redis.start()
        client = aof_redis.client()
        assert _stored_by_key(client, app_name) == expected  # the stream itself survived
        try:
            wait_for(lambda: _progress(client, app_name) == (EVENTS, 0), timeout=60)
        except AssertionError:
            print(_progress(client, app_name))
            for w in workers:
                print(w.output[-5000:])
            raise
        assert _table(tmp_path, env) == expected
    finally:
        for w in workers:
            w.stop()
        client.close()
    assert all("Traceback" not in w.output for w in workers), workers[0].output


@pytest.fixture
def small_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    (tmp_path / "small").mkdir()
    server = OwnRedis(tmp_path / "small", "--maxmemory-policy", "noeviction")
    yield server
    server.close()


@pytest.mark.timeout(600)
def test_a_full_redis_refuses_commits_whole_and_processing_resumes(
    tmp_path: Path, small_redis: OwnRedis, app_name: str
) -> None:
    expected = _write(tmp_path, app_name, pause=0)
    env = env_with(small_redis.url)
    assert cli("sendmany", "hitapp:hits", "hits.jsonl", cwd=tmp_path, env=env).returncode == 0
    client = small_redis.client()
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", str(used + 64 * 1024))  # the tables will not fit
    with WorkerProcess("hitapp:app", tmp_path, env) as worker:
        wait_for(lambda: "out of memory" in worker.output, timeout=120)
        time.sleep(1)  # refused again and again meanwhile
        # Whatever was committed is whole: each key's count is what its acknowledged
        # events make, and no more. Compare per partition (a key lives in one).
        table = _table(tmp_path, env)
        done, left = _progress(client, app_name)
        assert left > 0  # the tables did not fit: events wait, unacknowledged
        assert sum(table.values()) == done
        lines = [line for line in worker.output.splitlines() if "out of memory" in line]
        assert lines and all("Traceback" not in line for line in lines)
        client.config_set("maxmemory", "0")  # memory frees
        wait_for(lambda: _progress(client, app_name) == (EVENTS, 0), timeout=300)
        assert _table(tmp_path, env) == expected
        assert worker.stop() == 0, worker.output
    client.close()
