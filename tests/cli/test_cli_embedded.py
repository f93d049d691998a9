"""`runnel embedded start/status/stop`, and apps on redis+embedded:// sharing one server."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from runnel.exceptions import Misconfigured
from runnel_redis import embedded
from tests.support.cli_app import MODULE, write_app
from tests.support.ports import free_port, start_redis
from tests.support.processes import RUNNEL, cli


def plain_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNNEL_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def ping(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


@pytest.fixture
def embedded_url(tmp_path: Path) -> Iterator[str]:
    """A redis+embedded:// URL for a fresh directory; whatever server it gets is stopped after."""
    base = tmp_path / "proj"
    base.mkdir()
    url = f"redis+embedded://{base}"
    yield url
    state = embedded.state_dir(url)
    embedded.stop(state)
    # Belt and braces: a server that no longer answers (so stop() skipped it) but runs.
    info = state / "redis.pid"
    if info.exists():
        with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
            os.kill(int(info.read_text().strip()), signal.SIGKILL)


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return cli(*args, cwd=cwd, env=plain_env())


def test_start_status_stop(embedded_url: str, tmp_path: Path) -> None:
    assert embedded_url.startswith("redis+embedded:///")

    started = run("embedded", "start", "--url", embedded_url, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip()
    assert url.startswith("redis://"), started.stdout
    assert ping(url)

    # A second start finds the running server instead of starting another one.
    again = run("embedded", "start", "--url", embedded_url, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == url

    status = run("embedded", "status", "--url", embedded_url, cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert url in status.stdout

    stopped = run("embedded", "stop", "--url", embedded_url, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert not ping(url)

    status = run("embedded", "status", "--url", embedded_url, cwd=tmp_path)
    assert status.returncode == 1
    assert "not running" in status.stdout

    # Stopping a stopped server is harmless.
    stopped = run("embedded", "stop", "--url", embedded_url, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr


def test_status_before_any_start(embedded_url: str, tmp_path: Path) -> None:
    status = run("embedded", "status", "--url", embedded_url, cwd=tmp_path)
    assert status.returncode == 1
    assert "not running" in status.stdout


def test_data_survives_stop_and_start(embedded_url: str, tmp_path: Path) -> None:
    url = run("embedded", "start", "--url", embedded_url, cwd=tmp_path).stdout.strip()
    client = redis.Redis.from_url(url)
    client.set("kept", "yes")
    client.close()
    assert run("embedded", "stop", "--url", embedded_url, cwd=tmp_path).returncode == 0

    url = run("embedded", "start", "--url", embedded_url, cwd=tmp_path).stdout.strip()
    client = redis.Redis.from_url(url)
    try:
        assert client.get("kept") == b"yes"
    finally:
        client.close()


def test_app_on_embedded_url_shares_one_server(
    embedded_url: str, tmp_path: Path, app_name: str
) -> None:
    """`runnel send` processes (two at once, then one more) all use the same server."""
    write_app(tmp_path, app_name, app_kwargs=f", redis_url={embedded_url!r}")
    target = f"{MODULE}:pings"
    env = plain_env()
    procs = [
        subprocess.Popen(
            [*RUNNEL, "send", target, f'{{"key": "k{i}", "n": {i}}}'],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    done = run("send", target, '{"key": "k2", "n": 2}', cwd=tmp_path)
    assert done.returncode == 0, done.stderr

    server = embedded.running(embedded.state_dir(embedded_url))
    assert server is not None, "no embedded server left running"
    status = run("embedded", "status", "--url", embedded_url, cwd=tmp_path)
    assert status.returncode == 0 and server.url in status.stdout

    client = redis.Redis.from_url(server.url)
    try:
        keys = [f"__strm:{app_name}.pings.{n}" for n in range(4)]
        assert sum(client.xlen(k) for k in keys) == 3
    finally:
        client.close()


def test_a_command_that_starts_the_server_says_so(
    embedded_url: str, tmp_path: Path, app_name: str
) -> None:
    write_app(tmp_path, app_name)
    env = {**plain_env(), "RUNNEL_REDIS_URL": embedded_url}
    event = '{"key": "a", "n": 1}'
    first = cli("send", f"{MODULE}:pings", event, cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    assert "started the embedded development redis-server" in first.stderr
    again = cli("send", f"{MODULE}:pings", event, cwd=tmp_path, env=env)
    assert again.returncode == 0 and "started" not in again.stderr


def test_a_server_with_config_renamed_away_is_seen_started(tmp_path: Path) -> None:
    """A server run as managed services run theirs (CONFIG refused): start_server tells
    that it answers without asking it for its configuration."""
    directory = tmp_path / "restricted"
    server = start_redis(directory, persist=False, extra=("--rename-command", "CONFIG", ""))
    try:
        assert ping(server.url)
        assert embedded.running(directory) is None  # no server.json: not a project's server
        (directory / "server.json").write_text(f'{{"port": {server.port}, "pid": {server.pid}}}')
        assert embedded.running(directory) == server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server.pid, signal.SIGTERM)


def test_a_server_that_never_answers_as_ours_is_not_left_running(tmp_path: Path) -> None:
    """INFO renamed away: the server runs but cannot be told ours; start_server gives up
    with an error and stops it, rather than leave it holding its port."""
    port = free_port()
    with pytest.raises(Misconfigured, match="did not start"):
        embedded.start_server(
            tmp_path / "mute", port=port, persist=False, extra=("--rename-command", "INFO", "")
        )
    deadline = time.monotonic() + 10
    while ping(f"redis://127.0.0.1:{port}/0") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not ping(f"redis://127.0.0.1:{port}/0")
