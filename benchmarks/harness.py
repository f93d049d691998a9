"""Starting benchmark processes and running them against each other.

Every side runs in a fresh ``python -m benchmarks.worker_proc`` process. A drain is over
when the consumer group has read and acknowledged the whole backlog (polled in Redis every
100 ms, when the worker's RSS is sampled too); the processes are then sent SIGTERM and
report what they measured themselves.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import redis

from benchmarks.common import ROOT, drained

POLL = 0.1
TIMEOUT = 600.0


class Proc:
    """A ``benchmarks.worker_proc`` process; its stdout is JSON lines."""

    def __init__(self, *args: str) -> None:
        command = [sys.executable, "-m", "benchmarks.worker_proc", *args]
        self.popen = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def line(self) -> dict[str, Any]:
        assert self.popen.stdout is not None
        text = self.popen.stdout.readline()
        if not text:
            self.popen.wait()
            raise RuntimeError(f"{self.popen.args} exited with {self.popen.returncode}")
        return orjson.loads(text)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> dict[str, Any]:
        """SIGTERM, then the result line."""
        self.popen.send_signal(signal.SIGTERM)
        result = self.line()
        self.popen.wait()
        return result


def rss_mb(pid: int) -> float:
    """Resident set size of a process, from /proc (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def wait_drained(url: str, stream: str, group: str, procs: list[Proc]) -> float:
    """Wait until ``group`` has drained ``stream``; the peak RSS of ``procs`` meanwhile."""
    client = redis.Redis.from_url(url)
    peak = 0.0
    deadline = time.monotonic() + TIMEOUT
    try:
        while not drained(client, stream, group):
            for proc in procs:
                if not proc.alive():
                    raise RuntimeError(f"{proc.popen.args} exited with {proc.popen.returncode}")
                peak = max(peak, rss_mb(proc.pid))
            if time.monotonic() > deadline:
                raise TimeoutError(f"{stream} not drained by {group} in {TIMEOUT:.0f}s")
            time.sleep(POLL)
    finally:
        client.close()
    return peak


def drain(
    url: str,
    stream: str,
    side: str,
    group: str,
    batch: int,
    total: int,
    processes: int = 1,
    extra: Sequence[str] = (),
    action: str = "drain",
) -> dict[str, Any]:
    """Drain ``stream`` (``total`` events) with ``processes`` fresh consumer processes of
    ``side`` in ``group``.

    The rate runs from the first events processed (by any process) to the last ones:
    start-up, joining and stopping are not in it.
    """
    group = f"{side}-{group}"  # each side a group of its own on the same entries
    args = [action, "--url", url, "--stream", stream, "--group", group, "--batch", str(batch)]
    args += extra
    redis_cpu = RedisCpu(url)
    procs = [Proc(side, *args) for _ in range(processes)]
    try:
        peak = wait_drained(url, stream, group, procs)
        server_share = redis_cpu.share()
        results = [proc.stop() for proc in procs]
    finally:
        for proc in procs:
            if proc.alive():
                proc.popen.kill()
    events = sum(r["events"] for r in results)
    if events != total:  # more: some were delivered twice (a rebalance); fewer: a bug
        print(f"  warning: {side} processed {events:,} events of {total:,}", flush=True)
    earliest = min(results, key=lambda r: r["first"])
    elapsed = max(r["last"] for r in results) - earliest["first"]
    return {
        "rate": (events - earliest["untimed"]) / elapsed,
        "events": events,
        "seconds": elapsed,
        "peak_rss_mb": peak,
        "per_process": [r["events"] for r in results],
        "cpu": [r["cpu"] for r in results],
        "cpu_seconds": sum(r.get("cpu_seconds", 0.0) for r in results),
        "redis_cpu": server_share,
    }


class RedisCpu:
    """The share of a core redis-server used from now to :meth:`share` (its own count,
    ``INFO cpu``): with the workers' own shares, where a machine's cores went."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.start = time.monotonic(), self._used()

    def _used(self) -> float:
        client = redis.Redis.from_url(self.url)
        try:
            info = client.info("cpu")
        finally:
            client.close()
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])

    def share(self) -> float:
        began, used = self.start
        return (self._used() - used) / (time.monotonic() - began)


def alternate(
    rounds: int, runs: dict[str, Callable[[int], float]], label: str
) -> dict[str, list[float]]:
    """Each run once per round, in turn (so slow spells of the machine hit all alike);
    every figure measured, for the best and the spread."""
    got: dict[str, list[float]] = {name: [] for name in runs}
    for n in range(rounds):
        for name, run in runs.items():
            got[name].append(run(n))
        figures = "   ".join(f"{name} {values[-1] / 1000:,.1f}k/s" for name, values in got.items())
        print(f"  {label}, round {n + 1}: {figures}", flush=True)
    return got
