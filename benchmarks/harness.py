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

from benchmarks import serverstats
from benchmarks.common import APP, PARTITIONS, ROOT, drained, stream_keys
from runnel_redis import keys

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


# Gated drains: joined first, then filled, then released (benchmarks/scaling.py).


def owners(url: str, stream: str, processor: str) -> dict[str, int]:
    """How many partitions each worker holds the lock of, as ``runnel status`` counts them."""
    client = redis.Redis.from_url(url)
    try:
        held = client.mget(
            [keys.partition_lock(APP, stream, processor, n) for n in range(PARTITIONS)]
        )
    finally:
        client.close()
    counts: dict[str, int] = {}
    for owner in held:
        if owner:
            counts[owner.decode()] = counts.get(owner.decode(), 0) + 1
    return counts


def groups_made(url: str, stream: str, group: str) -> bool:
    client = redis.Redis.from_url(url)
    try:
        pipe = client.pipeline(transaction=False)
        for key in stream_keys(stream):
            pipe.xinfo_groups(key)
        replies = pipe.execute()
    except redis.ResponseError:  # a partition does not exist yet
        return False
    finally:
        client.close()
    return all(any(g["name"] == group.encode() for g in r) for r in replies)


def settled(url: str, stream: str, group: str, procs: list[Proc], timeout: float = 60) -> float:
    """Wait until ``procs`` (Runnel workers of processor ``group``) share the partitions
    evenly and have made the group on every one; how long that took."""
    began = time.monotonic()
    even = [PARTITIONS // len(procs)] * len(procs)
    while True:
        for proc in procs:
            if not proc.alive():
                raise RuntimeError(f"{proc.popen.args} exited with {proc.popen.returncode}")
        if sorted(owners(url, stream, group).values()) == even and groups_made(url, stream, group):
            return time.monotonic() - began
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"{group}: partitions not shared out in {timeout:.0f}s")
        time.sleep(0.05)


def gated_drain(
    url: str,
    stream: str,
    side: str,
    group: str,
    batch: int,
    total: int,
    processes: int,
    fill: Callable[[], None],
    extra: Sequence[str] = (),
) -> dict[str, Any]:
    """Start ``processes`` gated consumers of ``stream`` (empty), wait until they are
    ready (Runnel: the partitions shared out evenly), ``fill`` the backlog, then release
    them all at once (SIGUSR1). The window runs from the release to the last event
    processed: nothing but draining, by consumers that already own their partitions.
    redis-server's CPU and command statistics are taken around it."""
    group = f"{side}-{group}"
    args = ["drain", "--url", url, "--stream", stream, "--group", group, "--batch", str(batch)]
    procs = [Proc(side, *args, *extra, "--gated") for _ in range(processes)]
    try:
        if side == "plain":
            for proc in procs:
                if proc.line() != {"ready": True}:
                    raise RuntimeError("plain loop not ready")
        else:
            settled(url, stream, group, procs)
        fill()
        before = serverstats.snapshot(url)
        released = time.monotonic()
        for proc in procs:
            proc.popen.send_signal(signal.SIGUSR1)
        wait_drained(url, stream, group, procs)
        after = serverstats.snapshot(url)
        window = time.monotonic() - released
        results = [proc.stop() for proc in procs]
    finally:
        for proc in procs:
            if proc.alive():
                proc.popen.kill()
    events = sum(r["events"] for r in results)
    if events != total:
        print(f"  warning: {side} processed {events:,} events of {total:,}", flush=True)
    server = serverstats.between(before, after)
    return {
        "rate": events / (max(r["last"] for r in results) - released),
        "events": events,
        "per_process": [r["events"] for r in results],
        "cpu": [r["cpu"] for r in results],
        "worker_us": sum(r["cpu_seconds"] for r in results) * 1e6 / events,
        "redis_cpu": server.cpu / window,
        "server": server,
    }
