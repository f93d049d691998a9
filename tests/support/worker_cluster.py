"""Several real `runnel worker` processes sharing one processor's partitions (a cluster of
workers; a Redis Cluster is tests/support/redis_cluster.py).

``cluster`` is a fixture: tests/processes/conftest.py registers it, and the
re-run of those tests on a Redis Cluster imports it by name.

The app module (``clusterapp.py`` in ``tmp_path``) declares a ``pings`` stream of 8
partitions and one processor, ``work``, with short timings (2 s locks). A middleware
notes when Runnel hands each event over (right after the worker's lease check), and for
every event the processor, through Lua scripts on a plain redis client:

1. *enters* the partition: ``SET inside|{lock} "{pid}:{handed}" NX``. If another
   process's marker is there, it RPUSHes an overlap record to ``violations|{lock}`` and
   takes the marker over (so one overlap is reported once). In the same script it RPUSHes
   the event to ``seen|{lock}`` with the hand-over time, Redis TIME, and who held
   Runnel's lock of the partition at that moment;
2. sleeps 2 ms;
3. *leaves*: deletes the marker only if it is still its own (also when the iteration is
   cancelled).

Two processes inside one partition at once therefore always leave a record in
``violations``, and an iteration begun without the lock shows in ``seen``. A worker
frozen (SIGSTOP) or killed (SIGKILL) mid-iteration leaves its marker behind: the next
owner reports it once, naming the frozen iteration and when it was handed over.

Those keys are named after the partition's lock key (``{lock}``), so on a Redis Cluster
(``redis+cluster://``: keys of the cluster layout, see tests/redis_cluster/) they share its
slot and the script can run there too.

Times are microseconds of the wall clock: Redis TIME, and the workers' own clock for the
hand-over (the redis-server runs on this machine, so they are the same clock).
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import re
import signal
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from runnel_redis.layout import KeyLayout, layout_for
from tests.support.processes import WorkerProcess, cli, env_with, wait_for

MODULE = "clusterapp"
PROCESSOR = "work"
STREAM = "pings"
PARTITIONS = 8
KEYS = 24
LOCK_EXPIRY = 2.0
TEST_CLIENT = "cluster-test"
"""Client name of the test's own connections (the connection-drop test spares them)."""

APP_SOURCE = '''
import asyncio
import os
import time

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from runnel import App, Record
from runnel_redis.layout import layout_for

app = App(
    name={app_name!r},
    default_lock_expiry={lock_expiry!r},
    default_join_delay=0.2,
    default_grace_period=2,
    default_read_timeout=200,
    default_assignment_sleep=0.25,
    leadership_poll_interval=300,
)


class Ping(Record):
    key: str
    n: int


pings = app.stream("pings", record=Ping, partition_by="key", partition_count={partitions})
LAYOUT = layout_for(os.environ["RUNNEL_REDIS_URL"])

PID = str(os.getpid())
SLEEP = float(os.environ.get("TEST_SLEEP", "0.002"))

# KEYS: inside marker, violations, seen, Runnel's lock of the partition.
# ARGV: pid, began, partition, n, key.
ENTER = """
local t = redis.call('TIME')
local lock = redis.call('GET', KEYS[4]) or '-'
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local mine = ARGV[1] .. ':' .. ARGV[2]
if not redis.call('SET', KEYS[1], mine, 'NX') then
  local holder = redis.call('GET', KEYS[1])
  if string.match(holder, '^(%d+):') ~= ARGV[1] then
    redis.call('RPUSH', KEYS[2],
      ARGV[3] .. ':' .. holder .. ':' .. mine .. ':' .. ARGV[4] .. ':' .. now)
  end
  redis.call('SET', KEYS[1], mine)
end
redis.call('RPUSH', KEYS[3], ARGV[1] .. ':' .. ARGV[3] .. ':' .. ARGV[5] .. ':' .. ARGV[4]
  .. ':' .. ARGV[2] .. ':' .. now .. ':' .. lock)
return 1
"""

# KEYS: inside marker. ARGV: our marker. Compare and delete.
LEAVE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# KEYS: leader log. ARGV: pid.
LEAD = """
local t = redis.call('TIME')
redis.call('RPUSH', KEYS[1], ARGV[1] .. ':' .. t[1] .. string.format('%06d', tonumber(t[2])))
return 1
"""

# KEYS: a counter.
COUNT = "return redis.call('INCR', KEYS[1])"

_client = None


def client():
    global _client
    if _client is None:
        url = os.environ["TEST_RECORD_URL"]
        if url.startswith("redis+cluster://"):
            _client = RedisCluster.from_url(url.replace("redis+cluster://", "redis://", 1))
        else:
            _client = aioredis.Redis.from_url(url)
    return _client


async def call(script, keys, args):
    # Every script is safe to run twice, so a dropped connection is simply retried.
    for _ in range(200):
        try:
            return await client().eval(script, len(keys), *keys, *args)
        except (RedisConnectionError, RedisTimeoutError, AttributeError, TypeError):
            # (AttributeError, TypeError: redis-py's own, from a connection closed under
            # it, as on the cluster client; see runnel_redis.seam._torn_down.)
            if asyncio.current_task().cancelling():
                raise asyncio.CancelledError from None  # redis-py turned it into an error
            await asyncio.sleep(0.05)
    raise RuntimeError("could not record to redis")


HANDED = {{}}


class Stamp:
    """Notes when Runnel hands each event over (right after its lease check)."""

    async def handler(self, parent, partition, **kwargs):
        async for event in parent:
            HANDED[partition.number] = time.time_ns() // 1000
            yield event


@app.processor(pings, middleware=[Stamp()])
async def work(events):
    number = events.partition.number
    lock = LAYOUT.partition_lock(app.name, "pings", "work", number)
    # Named after the lock, so that on a Redis Cluster all four share its slot.
    inside, violations, seen = ("inside|" + lock, "violations|" + lock, "seen|" + lock)
    async for ping in events.records():
        began = str(HANDED[number])
        await call(
            ENTER, [inside, violations, seen, lock], [PID, began, number, ping.n, ping.key]
        )
        try:
            await asyncio.sleep(SLEEP)
        finally:  # also when Runnel cancels the iteration: it is over, nothing runs on
            await call(LEAVE, [inside], [PID + ":" + began])


if os.environ.get("TEST_LEADER_TIMER"):

    @app.timer(interval=0.2, on_leader=True)
    async def lead():
        await call(LEAD, ["leader_log"], [PID])
        await call(COUNT, ["leader_runs"], [])
'''


@dataclass(frozen=True)
class Seen:
    """One loop iteration that began: who, where, what, and when (microseconds)."""

    pid: int
    partition: int
    key: str
    n: int
    began: int  # the worker's clock when Runnel handed the event over
    entered: int  # Redis TIME when it entered the partition
    lock: str  # who held Runnel's lock of the partition then (an executor id, or "-")


@dataclass(frozen=True)
class Overlap:
    """An iteration entered a partition while another process's marker was there."""

    partition: int
    holder_pid: int
    holder_began: int
    pid: int
    began: int
    n: int
    at: int  # Redis TIME


def parse_seen(raw: bytes) -> Seen:
    pid, partition, key, n, began, entered, lock = raw.decode().split(":")
    return Seen(int(pid), int(partition), key, int(n), int(began), int(entered), lock)


def parse_overlap(raw: bytes) -> Overlap:
    partition, holder_pid, holder_began, pid, began, n, at = raw.decode().split(":")
    return Overlap(*map(int, (partition, holder_pid, holder_began, pid, began, n, at)))


def first_occurrences(ns: list[int]) -> list[int]:
    seen: set[int] = set()
    out = []
    for n in ns:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


class Cluster:
    """The app directory, the workers started in it and what they recorded."""

    def __init__(self, directory: Path, app_name: str, redis_url: str) -> None:
        self.dir = directory
        self.app_name = app_name
        self.redis_url = redis_url
        self.layout: KeyLayout = layout_for(redis_url)
        self.client = client_for(redis_url)
        self.workers: list[WorkerProcess] = []
        self.sent: list[dict[str, object]] = []
        self.extra_env: dict[str, str] = {}
        self.executor_pids: dict[str, int] = {}
        """Every executor id ever seen in the membership, and its worker's pid."""
        self.target = f"{MODULE}:app"

    # Driving processes.

    @property
    def env(self) -> dict[str, str]:
        return env_with(self.redis_url, TEST_RECORD_URL=self.redis_url, **self.extra_env)

    def start(self) -> WorkerProcess:
        worker = WorkerProcess(self.target, self.dir, self.env)
        self.workers.append(worker)
        return worker

    def run(self, *args: str, input: str | None = None):
        return cli(*args, cwd=self.dir, env=self.env, input=input)

    def send(self, count: int, keys: int = KEYS) -> list[dict[str, object]]:
        """``runnel sendmany`` ``count`` more events, numbered on from the last ones."""
        start = len(self.sent)
        events = [{"key": f"k{n % keys}", "n": n} for n in range(start, start + count)]
        text = "".join(json.dumps(e) + "\n" for e in events)
        done = self.run("sendmany", f"{MODULE}:{STREAM}", "-", input=text)
        assert done.returncode == 0, done.stderr
        self.sent.extend(events)
        return events

    def status(self) -> dict:
        done = self.run("status", self.target, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    # Reading what happened.

    def now(self) -> int:
        """Redis TIME in microseconds (the clock the processor's records are stamped with)."""
        seconds, micros = self.client.time()
        return seconds * 1_000_000 + micros

    def lock_key(self, partition: int) -> str:
        return self.layout.partition_lock(self.app_name, STREAM, PROCESSOR, partition)

    def partition_key(self, partition: int) -> str:
        return self.layout.partition(self.app_name, STREAM, partition)

    def recorded(self, name: str) -> list[list[bytes]]:
        """A record list per partition (kept in the slot of the partition's lock)."""
        return [self.client.lrange(f"{name}|{self.lock_key(p)}", 0, -1) for p in range(PARTITIONS)]

    def seen(self) -> list[Seen]:
        """Merged by time; each partition's own order is kept."""
        lists = [[parse_seen(x) for x in raw] for raw in self.recorded("seen")]
        return list(heapq.merge(*lists, key=lambda s: s.entered))

    def overlaps(self) -> list[Overlap]:
        lists = [[parse_overlap(x) for x in raw] for raw in self.recorded("violations")]
        return list(heapq.merge(*lists, key=lambda o: o.at))

    def seen_numbers(self) -> set[int]:
        return {s.n for s in self.seen()}

    def all_seen(self) -> bool:
        return self.seen_numbers() >= {int(e["n"]) for e in self.sent}  # type: ignore[call-overload]

    def wait_all_seen(self, timeout: float = 60) -> None:
        wait_for(self.all_seen, timeout, interval=0.1)

    def members(self) -> dict[str, dict]:
        raw = self.client.get(self.layout.membership(self.app_name, STREAM, PROCESSOR))
        members = json.loads(raw) if raw else {}
        for executor, info in members.items():
            self.executor_pids[executor] = info["pid"]
        return members

    def lock_owners(self) -> dict[int, str | None]:
        values = [self.client.get(self.lock_key(n)) for n in range(PARTITIONS)]
        return {n: (v.decode() if v else None) for n, v in enumerate(values)}

    def beating(self, executor: str) -> bool:
        key = self.layout.heartbeat(self.app_name, STREAM, PROCESSOR, executor)
        return bool(self.client.exists(key))

    def partitions_of(self, worker: WorkerProcess) -> list[int]:
        for info in self.members().values():
            if info.get("pid") == worker.proc.pid:
                return sorted(info.get("partitions", []))
        return []

    def settled(self, live: list[WorkerProcess]) -> bool:
        """Exactly one executor per live worker, every partition owned by exactly one of
        them, and each partition's lock held by its owner."""
        members = self.members()
        pids = sorted(info.get("pid") for info in members.values())
        if pids != sorted(w.proc.pid for w in live):
            return False
        owner: dict[int, str] = {}
        for executor, info in members.items():
            if not self.beating(executor):
                return False
            for p in info.get("partitions", []):
                if p in owner:
                    return False
                owner[p] = executor
        if sorted(owner) != list(range(PARTITIONS)):
            return False
        return self.lock_owners() == owner

    def wait_settled(self, live: list[WorkerProcess], timeout: float = 30) -> None:
        wait_for(lambda: self.settled(live), timeout, interval=0.05)

    def pending_ids(self, partitions: list[int]) -> dict[int, list[int]]:
        """Per partition: the event numbers the group delivered but nobody acknowledged."""
        out: dict[int, list[int]] = {}
        for p in partitions:
            key = self.partition_key(p)
            ids = [
                x["message_id"] for x in self.client.xpending_range(key, PROCESSOR, "-", "+", 10**6)
            ]
            numbers = []
            for xid in ids:
                [(_, fields)] = self.client.xrange(key, xid, xid)
                numbers.append(json.loads(fields[b"data"])["n"])
            out[p] = numbers
        return out

    def total_pending(self) -> int:
        total = 0
        for p in range(PARTITIONS):
            key = self.partition_key(p)
            if self.client.exists(key):
                total += self.client.xpending(key, PROCESSOR)["pending"]
        return total

    # The checks every test ends with.

    def check_at_least_once_in_order(self) -> list[Seen]:
        seen = self.seen()
        sent_numbers = {int(e["n"]) for e in self.sent}  # type: ignore[call-overload]
        assert {s.n for s in seen} == sent_numbers, "an event was lost (or invented)"
        want: dict[str, list[int]] = {}
        for e in self.sent:
            want.setdefault(str(e["key"]), []).append(int(e["n"]))  # type: ignore[call-overload]
        got: dict[str, list[int]] = {}
        for s in seen:
            got.setdefault(s.key, []).append(s.n)
        assert set(got) == set(want)
        for key in want:
            assert first_occurrences(got[key]) == want[key], f"order broken for {key}"
        # A key lives in one partition.
        where: dict[str, set[int]] = {}
        for s in seen:
            where.setdefault(s.key, set()).add(s.partition)
        assert all(len(ps) == 1 for ps in where.values()), where
        return seen

    def check_fenced(self, seen: list[Seen], *frozen: Frozen) -> list[Seen]:
        """Every iteration began while its worker held Runnel's lock of the partition.

        The exception: a worker frozen at some time may finish, after the freeze, the one
        iteration per partition it held that was handed over before (see
        :func:`check_overlaps`). Returns those.
        """
        for w in self.workers:  # executors that came and went between two looks
            for executor in re.findall(rf"<Executor {PROCESSOR} (\w+)>", w.output):
                self.executor_pids.setdefault(executor, w.proc.pid)
        excused: dict[tuple[int, int, int], list[Seen]] = {}
        for s in seen:
            holder = self.executor_pids.get(s.lock)
            if holder == s.pid:
                continue
            freeze = next(
                (
                    (pid, at, s.partition)
                    for pid, at, partitions in sorted(frozen, key=lambda f: f[1])
                    if pid == s.pid and s.began < at < s.entered and s.partition in partitions
                ),
                None,
            )
            assert freeze is not None, (
                f"pid {s.pid} began event {s.n} on partition {s.partition} while the lock "
                f"was held by {s.lock} (pid {holder})"
            )
            excused.setdefault(freeze, []).append(s)
        assert all(len(v) <= 1 for v in excused.values()), excused
        return [s for v in excused.values() for s in v]

    def check_settled(self, live: list[WorkerProcess]) -> None:
        self.wait_settled(live)
        members = self.members()
        owners = self.lock_owners()
        assert sorted(p for info in members.values() for p in info["partitions"]) == list(
            range(PARTITIONS)
        )
        for executor, info in members.items():
            assert info["pid"] in {w.proc.pid for w in live}
            for p in info["partitions"]:
                assert owners[p] == executor

    def logs(self) -> str:
        out = []
        for w in self.workers:
            lines = w.output.splitlines()
            out.append(f"--- worker pid {w.proc.pid} ({w.log_path.name}) ---")
            out.extend(lines[-120:])
        return "\n".join(out)


def client_for(redis_url: str) -> redis.Redis | RedisCluster:
    """The test's own client: a plain one, or a cluster one for ``redis+cluster://``."""
    if redis_url.startswith("redis+cluster://"):
        plain = redis_url.replace("redis+cluster://", "redis://", 1)
        return RedisCluster.from_url(plain, client_name=TEST_CLIENT)
    return redis.Redis.from_url(redis_url, client_name=TEST_CLIENT)


Frozen = tuple[int, int, Iterable[int]]
"""A worker frozen or killed: its pid, when (Redis TIME), and the partitions it held."""


def check_overlaps(overlaps: list[Overlap], *frozen: Frozen) -> None:
    """No two processes were ever inside one partition at once.

    The one exception: a worker frozen (SIGSTOP) or killed at some time may have been in
    the middle of one iteration on each partition it held (handed over before the
    freeze). Its marker, or after a SIGCONT the rest of that iteration, then overlaps with
    the next owner's iterations, after the freeze. Each record names the iteration by its
    hand-over time: per freeze and partition, only one such iteration may show up.
    """
    excused: dict[tuple[int, int, int], set[int]] = {}
    for o in overlaps:
        for pid, at, partitions in sorted(frozen, key=lambda f: f[1]):
            if o.partition not in set(partitions) or o.at <= at:
                continue
            if o.holder_pid == pid and o.holder_began < at:
                excused.setdefault((pid, at, o.partition), set()).add(o.holder_began)
                break
            if o.pid == pid and o.began < at:
                excused.setdefault((pid, at, o.partition), set()).add(o.began)
                break
        else:
            raise AssertionError(f"two processes inside partition {o.partition} at once: {o}")
    assert all(len(iterations) <= 1 for iterations in excused.values()), (excused, overlaps)


def is_stopped(pid: int) -> bool:
    """Whether the process is in the stopped state (SIGSTOP has taken effect)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] in ("T", "t")


def pause(worker: WorkerProcess) -> None:
    worker.signal(signal.SIGSTOP)
    wait_for(lambda: is_stopped(worker.proc.pid), 10, interval=0.005)


def write_app(directory: Path, app_name: str) -> None:
    (directory / f"{MODULE}.py").write_text(
        textwrap.dedent(
            APP_SOURCE.format(app_name=app_name, lock_expiry=LOCK_EXPIRY, partitions=PARTITIONS)
        )
    )


@pytest.fixture
def cluster(tmp_path: Path, app_name: str, redis_url: str) -> Iterator[Cluster]:
    write_app(tmp_path, app_name)
    c = Cluster(tmp_path, app_name, redis_url)
    yield c
    for w in c.workers:
        if w.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(w.proc.pid, signal.SIGKILL)
        w.__exit__(None, None, None)
    # Shown with a failing test's report.
    print(c.logs())
    c.client.close()
