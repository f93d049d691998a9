"""A Redis at maxmemory with noeviction: workers drain and acknowledge what is there,
sends fail with one line (Redis 7's allow-oom script flag)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from runnel_redis.embedded import Server
from tests.cli.test_cli_errors import assert_one_line_error
from tests.support.cli_app import MODULE, by_key, expected_by_key, jsonl, pings, write_app
from tests.support.ports import start_redis
from tests.support.processes import WorkerProcess, cli, env_with, wait_for

COUNT = 600


@pytest.fixture
def full_server(tmp_path: Path) -> Iterator[Server]:
    server = start_redis(
        tmp_path / "full", persist=False, extra=("--maxmemory-policy", "noeviction")
    )
    yield server
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGTERM)


def redis_major(client: redis.Redis) -> int:
    return int(str(client.info("server")["redis_version"]).split(".")[0])


def test_worker_drains_a_full_redis(
    full_server: Server, tmp_path: Path, app_name: str, redis_client: redis.Redis, redis_url: str
) -> None:
    full = redis.Redis(port=full_server.port)
    if redis_major(full) < 7:
        pytest.skip("script flags (allow-oom) need Redis 7")
    write_app(tmp_path, app_name)
    # Processors record what they saw on the suite's other server: this one refuses writes.
    env = env_with(full_server.url, TEST_RECORD_URL=redis_url)
    events = pings(COUNT, keys=7)
    (tmp_path / "events.jsonl").write_text(jsonl(events))
    assert cli("sendmany", f"{MODULE}:pings", "events.jsonl", cwd=tmp_path, env=env).returncode == 0
    used = int(full.info("memory")["used_memory"])
    full.config_set("maxmemory", str(used // 2))
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        full.set("probe", "x")

    sent = cli("send", f"{MODULE}:pings", '{"key": "k1", "n": 9999}', cwd=tmp_path, env=env)
    assert_one_line_error(sent, "out of memory")

    with WorkerProcess(f"{MODULE}:app", tmp_path, env) as worker:
        wait_for(lambda: redis_client.llen("seen:a") == COUNT, timeout=120)
        seen = [x.decode() for x in redis_client.lrange("seen:a", 0, -1)]
        assert by_key(seen) == expected_by_key(events)

        def pending() -> int:
            total = 0
            for n in range(4):
                key = f"__strm:{app_name}.pings.{n}"
                total += full.xpending(key, "a")["pending"] + full.xpending(key, "b")["pending"]
            return total

        wait_for(lambda: pending() == 0 and redis_client.llen("seen:b") == COUNT, timeout=120)
        assert worker.stop() == 0, worker.output
    assert "OOM" not in worker.output, worker.output
    full.close()
