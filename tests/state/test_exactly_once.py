"""The guarantee under faults, with real worker processes: three workers count 20,000
events per key while one is ``kill -9``-ed again and again, one is frozen (SIGSTOP) past
its lock expiry and then continued, and one joins late. A table ends equal to the number
of events per key, exactly; and a per-key window of event time emits each closed window
once, with its exact count, to a stream whose own processor collects them in a table.

The same run with a processor written by hand, the way a user would without tables (an
``HINCRBY`` per event, then the acknowledgement), over-counts: what a killed worker had
counted but not acknowledged is delivered again and counted twice. That is why tables
exist, and it shows the faults of the run really hit events in flight.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
import redis

from tests.support.processes import WorkerProcess, cli, env_with, wait_for

EVENTS = 20_000
KEYS = 50
WINDOW = 1000  # event time is the event's number: 20 windows per key
PARTITIONS = 8
LOCK_EXPIRY = 3.0

APP = """
import asyncio
import os
import time

import redis

from runnel import App, Record, WindowClosed

app = App(name={name!r})


class Hit(Record):
    key: str
    n: int


hits = app.stream("hits", record=Hit, partition_by="key", partition_count={partitions})
counts = app.table("counts", source=hits, default=0)
closed = app.stream("closed", record=WindowClosed, partition_by="key", partition_count=4)
per_window = app.table("per_window", source=hits, default=0).tumbling(
    {window}, time="n", on_close=closed
)
seen = app.table("seen", source=closed, default=[])
_client = redis.Redis.from_url(os.environ["RUNNEL_REDIS_URL"])


if os.environ.get("COUNT_BY_HAND"):

    @app.processor(hits)
    async def count(events):
        async for hit in events.records():
            _client.hincrby("by-hand", hit.key, 1)  # acknowledged after: at least once
            time.sleep(0.001)
            await asyncio.sleep(0)

else:

    @app.processor(hits)
    async def count(events):
        async for hit in events.records():
            counts[hit.key] += 1
            per_window[hit.key] += 1
            time.sleep(0.001)
            await asyncio.sleep(0)

    @app.processor(closed)
    async def collect(events):
        async for window in events.records():
            seen[window.key] = seen[window.key] + [[window.start, window.value]]
"""


def _sent() -> list[str]:
    rng = random.Random(11)
    return [f"k{rng.randrange(KEYS)}" for _ in range(EVENTS)]


def _lines(path: Path) -> dict[str, int]:
    sent = _sent()
    path.write_text("".join(json.dumps({"key": k, "n": n}) + "\n" for n, k in enumerate(sent)))
    return dict(Counter(sent))


def _windows_closed() -> dict[str, list[list[float]]]:
    """Per key, ``[start, count]`` of each window that closes: those ending by the time the
    last thousand events come (every partition sees some of them)."""
    per: Counter[tuple[str, int]] = Counter()
    for n, key in enumerate(_sent()):
        per[(key, n // WINDOW * WINDOW)] += 1
    out: dict[str, list[list[float]]] = {}
    for (key, start), count in sorted(per.items()):
        if start + WINDOW <= EVENTS - WINDOW:
            out.setdefault(key, []).append([float(start), count])
    return out


def _settled(client: redis.Redis, app_name: str) -> bool:
    streams = [f"__strm:{app_name}.hits.{n}" for n in range(PARTITIONS)]
    streams += [f"__strm:{app_name}.closed.{n}" for n in range(4)]
    for key in streams:
        if not client.exists(key):
            if ".hits." in key:
                return False
            continue
        groups = client.xinfo_groups(key)
        if not groups or groups[0]["lag"] != 0 or groups[0]["pending"] != 0:
            return False
    return True


def _faulty_run(
    tmp_path: Path, redis_url: str, app_name: str, *, by_hand: bool
) -> tuple[dict[str, int], str]:
    """Send the events while the workers are mistreated, until everything is acknowledged;
    the counts per key sent, and what the frozen worker logged."""
    (tmp_path / "hitapp.py").write_text(
        textwrap.dedent(APP.format(name=app_name, partitions=PARTITIONS, window=WINDOW))
    )
    expected = _lines(tmp_path / "hits.jsonl")
    extra = {"RUNNEL_DEFAULT_LOCK_EXPIRY": str(LOCK_EXPIRY), "RUNNEL_DEFAULT_GRACE_PERIOD": "1"}
    if by_hand:
        extra["COUNT_BY_HAND"] = "1"
    env = env_with(redis_url, **extra)
    client = redis.Redis.from_url(redis_url)
    workers: list[WorkerProcess] = []

    def start() -> WorkerProcess:
        workers.append(WorkerProcess("hitapp:app", tmp_path, env))
        return workers[-1]

    def kill_and_replace(victim: WorkerProcess) -> WorkerProcess:
        victim.kill()  # SIGKILL: nothing acknowledged on the way out
        return start()

    try:
        victim, frozen = start(), start()
        sending = subprocess.Popen(
            [sys.executable, "-m", "runnel", "sendmany", "hitapp:hits", "hits.jsonl"],
            cwd=tmp_path,
            env=env,
        )
        wait_for(lambda: _acknowledged(client, app_name) > 1000, timeout=120)
        victim = kill_and_replace(victim)
        os.kill(frozen.proc.pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        time.sleep(1.5)
        victim = kill_and_replace(victim)
        start()  # one that joins late
        time.sleep(max(0.0, frozen_at + 2 * LOCK_EXPIRY - time.monotonic()))
        os.kill(frozen.proc.pid, signal.SIGCONT)  # it wakes up past its locks: fenced
        time.sleep(1.5)
        victim = kill_and_replace(victim)
        assert sending.wait(300) == 0
        wait_for(lambda: _settled(client, app_name), timeout=300)
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.stop()
        client.close()
    return expected, frozen.output


def _acknowledged(client: redis.Redis, app_name: str) -> int:
    total = 0
    for n in range(PARTITIONS):
        key = f"__strm:{app_name}.hits.{n}"
        if client.exists(key):
            for group in client.xinfo_groups(key):
                total += int(group["entries-read"] or 0) - int(group["pending"])
    return total


@pytest.mark.timeout(900)
def test_a_table_counts_each_event_once_whatever_happens_to_the_workers(
    tmp_path: Path, redis_url: str, app_name: str
) -> None:
    expected, frozen = _faulty_run(tmp_path, redis_url, app_name, by_hand=False)
    assert "lost the lock of partition" in frozen  # it woke up without its partitions
    env = env_with(redis_url)
    dumped = cli("table", "dump", "hitapp:counts", "--json", cwd=tmp_path, env=env)
    assert dumped.returncode == 0, dumped.stderr
    counts = {}
    for line in dumped.stdout.splitlines():
        entry = json.loads(line)
        counts[entry["key"]] = entry["value"]
    assert counts == expected
    dumped = cli("table", "dump", "hitapp:seen", "--json", cwd=tmp_path, env=env)
    assert dumped.returncode == 0, dumped.stderr
    seen = {}
    for line in dumped.stdout.splitlines():
        entry = json.loads(line)
        seen[entry["key"]] = sorted(entry["value"])
    want = _windows_closed()
    assert {k: [w for w in v if w in want.get(k, [])] for k, v in seen.items()} == want
    for windows in seen.values():  # and none twice, including those the test does not expect
        starts = [start for start, _ in windows]
        assert len(starts) == len(set(starts))


@pytest.mark.timeout(900)
def test_counting_by_hand_with_at_least_once_over_counts_in_the_same_run(
    tmp_path: Path, redis_url: str, app_name: str
) -> None:
    expected, _ = _faulty_run(tmp_path, redis_url, app_name, by_hand=True)
    client = redis.Redis.from_url(redis_url)
    counted = {k.decode(): int(v) for k, v in client.hgetall("by-hand").items()}
    client.close()
    assert set(counted) == set(expected)
    assert all(counted[k] >= expected[k] for k in expected)  # at least once...
    assert sum(counted.values()) > EVENTS  # ...and more than once for some
