"""Test helpers: waiting for conditions and driving real `runnel` processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RUNNEL = [sys.executable, "-m", "runnel"]


def wait_for(check: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Poll ``check`` until it returns something truthy; fail the test after ``timeout``.

    The timeout only bounds a hung test; no test asserts on how long anything took.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {check}")
        time.sleep(interval)


def cli(
    *args: str, cwd: Path, env: dict[str, str], input: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the real `runnel` command line and capture what it prints."""
    return subprocess.run(
        [*RUNNEL, *args],
        cwd=cwd,
        env=env,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def cli_on_terminal(
    *args: str, cwd: Path, env: dict[str, str], answer: str
) -> tuple[int, str, str]:
    """Run `runnel` with its standard input on a terminal, typing ``answer`` (``"\\x04"``,
    Ctrl-D at the start of a line, ends the input): exit code, stdout and stderr."""
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*RUNNEL, *args],
            cwd=cwd,
            env=env,
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(slave)
        os.write(master, answer.encode())
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(master)
    return proc.returncode, out, err


class WorkerProcess:
    """A `runnel worker` in its own process, with its output kept in a file."""

    def __init__(self, target: str, cwd: Path, env: dict[str, str], *extra: str) -> None:
        self.log_path = cwd / f"worker-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [*RUNNEL, "worker", target, *extra],
            cwd=cwd,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def output(self) -> str:
        return self.log_path.read_text()

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, then wait for the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self._log.close()


def env_with(redis_url: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["RUNNEL_REDIS_URL"] = redis_url
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("RUNNEL_DEFAULT_JOIN_DELAY", "0")
    env.update(extra)
    return env
