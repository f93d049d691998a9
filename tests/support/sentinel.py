"""A real Redis Sentinel setup on free ports: a primary redis-server, a replica and three
sentinels watching them, every one of them password-protected, for the sentinel tests.

:func:`start_sentinels` starts them in a temporary directory and waits until every
sentinel knows the master, its replica and the other sentinels. :class:`SentinelGroup`
offers what the failover tests need: a failover by ``SENTINEL FAILOVER``, the master
killed with SIGKILL (a replica is promoted once the sentinels agree it is down), the
killed node started again (the sentinels make it a replica of the new master), and
:meth:`SentinelGroup.heal` to give each test a master with a replica in sync.

Timeouts here only bound a hung fixture; no test asserts on how long anything took.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from tests.support.ports import free_port
from tests.support.redis_cluster import binaries

HOST = "127.0.0.1"
SERVICE = "runnel"
DATA_PASSWORD = "data-s3cret"
SENTINEL_PASSWORD = "sentinel-s3cret"
DOWN_AFTER_MS = 1000
"""How long a silent master is given before the sentinels call it down."""
FAILOVER_TIMEOUT_MS = 2000
"""Kept small: a sentinel does not fail the same master over again within twice this."""
SETTLE = 60.0


def _until(check: Callable[[], Any], what: str, timeout: float = SETTLE) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = check()
        except (redis.ConnectionError, redis.ResponseError):
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"the sentinel setup did not settle: {what}")
        time.sleep(0.1)


@dataclass
class Process:
    """One redis-server (a data node or a sentinel) of the setup."""

    port: int
    directory: Path
    arguments: list[str]
    password: str
    process: subprocess.Popen[bytes] | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port, password=self.password, socket_timeout=5)

    def command(self, *args: object) -> Any:
        with self.client() as client:
            return client.execute_command(*args)

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "redis.log", "ab") as log:  # the child keeps its own copy
            self.process = subprocess.Popen(
                [binaries()[0], *self.arguments], stdout=log, stderr=subprocess.STDOUT
            )
        _until(self._answers, f"{HOST}:{self.port} did not start")

    def _answers(self) -> bool:
        if not self.alive:
            log = (self.directory / "redis.log").read_text(errors="replace")
            raise AssertionError(f"redis-server on port {self.port} exited:\n{log[-2000:]}")
        return bool(self.command("PING"))

    def kill(self) -> None:
        """SIGKILL: no shutdown, no goodbye."""
        if self.process is not None and self.alive:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def info(self, section: str) -> dict[str, Any]:
        with self.client() as client:
            return dict(client.info(section))


def _data_node(directory: Path, replica_of: int | None = None) -> Process:
    port = free_port()
    arguments = [
        "--port", str(port),
        "--bind", HOST,
        "--dir", str(directory),
        "--appendonly", "no",
        "--save", "",
        "--repl-diskless-sync-delay", "0",
        "--protected-mode", "no",
        "--requirepass", DATA_PASSWORD,
        "--masterauth", DATA_PASSWORD,
    ]  # fmt: skip
    if replica_of is not None:
        arguments += ["--replicaof", HOST, str(replica_of)]
    return Process(port, directory, arguments, DATA_PASSWORD)


def _sentinel(directory: Path, master: int) -> Process:
    port = free_port()
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "sentinel.conf"  # a sentinel rewrites its config: a file of its own
    config.write_text(
        "\n".join(
            [
                f"port {port}",
                f"bind {HOST}",
                f"dir {directory}",
                "protected-mode no",
                f"requirepass {SENTINEL_PASSWORD}",
                f"sentinel sentinel-pass {SENTINEL_PASSWORD}",
                f"sentinel monitor {SERVICE} {HOST} {master} 2",
                f"sentinel auth-pass {SERVICE} {DATA_PASSWORD}",
                f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}",
                f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}",
                f"sentinel parallel-syncs {SERVICE} 1",
                "",
            ]
        )
    )
    return Process(port, directory, [str(config), "--sentinel"], SENTINEL_PASSWORD)


@dataclass
class SentinelGroup:
    """A master, its replica and three sentinels; :meth:`url` names them."""

    nodes: list[Process]
    sentinels: list[Process]
    killed: list[Process] = field(default_factory=list)

    def url(self, scheme: str = "redis+sentinel", db: int = 0, **options: str) -> str:
        """``redis+sentinel://:DATA@S1,S2,S3/runnel/DB?sentinel_password=...``."""
        hosts = ",".join(f"{HOST}:{s.port}" for s in self.sentinels)
        query = {"sentinel_password": SENTINEL_PASSWORD, **options}
        tail = "&".join(f"{k}={v}" for k, v in query.items())
        return f"{scheme}://:{DATA_PASSWORD}@{hosts}/{SERVICE}/{db}?{tail}"

    def master_port(self) -> int:
        """The master's port as a majority of the sentinels name it."""
        named = [self._named(s) for s in self.sentinels if s.alive]
        ports = [p for p in named if p is not None]
        best = max(set(ports), key=ports.count) if ports else None
        assert best is not None and ports.count(best) >= 2, f"sentinels disagree: {named}"
        return best

    def _named(self, sentinel: Process) -> int | None:
        try:
            reply = sentinel.command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
        except redis.RedisError:
            return None
        return int(reply[1]) if reply else None

    def node(self, port: int) -> Process:
        return next(n for n in self.nodes if n.port == port)

    @property
    def master(self) -> Process:
        return self.node(self.master_port())

    def master_client(self) -> redis.Redis:
        return self.master.client()

    def _settled(self) -> bool:
        """Every sentinel names one master, which says it is one and has every other live
        node as a replica in sync with it."""
        ports = {self._named(s) for s in self.sentinels}
        if len(ports) != 1:
            return False
        master = self.node(ports.pop())  # type: ignore[arg-type]
        info = master.info("replication")
        if info.get("role") != "master":
            return False
        live = [n for n in self.nodes if n.alive and n is not master]
        if int(info.get("connected_slaves", 0)) != len(live):
            return False
        offset = int(info["master_repl_offset"])
        for node in live:
            mine = node.info("replication")
            if mine.get("master_link_status") != "up" or mine.get("master_port") != master.port:
                return False
            if int(mine.get("slave_repl_offset", -1)) != offset:
                return False
        # Every sentinel knows the replicas (a failover needs one it knows).
        for sentinel in self.sentinels:
            with sentinel.client() as client:
                replicas = client.sentinel_slaves(SERVICE)
            if len([r for r in replicas if not r["is_sdown"]]) < len(live):
                return False
        return True

    def wait_settled(self, what: str = "a master with replicas in sync") -> None:
        _until(self._settled, what)

    def wait_synced(self) -> None:
        """Until the replicas have everything the master has."""
        self.wait_settled("the replicas caught up")

    def failover(self) -> int:
        """``SENTINEL FAILOVER``; waits for the new master; its port."""
        old = self.master_port()
        _until(
            lambda: self.sentinels[0].command("SENTINEL", "FAILOVER", SERVICE),
            "SENTINEL FAILOVER was accepted",
        )
        _until(lambda: self.master_port() != old, "a new master after SENTINEL FAILOVER")
        self.wait_settled("the old master a replica of the new one")
        return self.master_port()

    def kill_master(self) -> Process:
        """SIGKILL the master; waits until the sentinels name its replica instead."""
        master = self.master
        master.kill()
        self.killed.append(master)
        _until(lambda: self.master_port() != master.port, "a replica promoted")
        return master

    def revive(self, node: Process) -> None:
        """Start a killed node again; the sentinels make it a replica of the master."""
        node.start()
        if node in self.killed:
            self.killed.remove(node)
        self.wait_settled("the revived node a replica in sync")

    def heal(self) -> None:
        for node in list(self.killed):
            self.revive(node)
        self.wait_settled()

    def flush(self) -> None:
        self.master.command("FLUSHALL")
        self.wait_synced()

    def stop(self) -> None:
        for process in [*self.sentinels, *self.nodes]:
            process.kill()


@contextlib.contextmanager
def start_sentinels(directory: Path) -> Iterator[SentinelGroup]:
    """A master, a replica and three sentinels, settled; all killed at the end."""
    primary = _data_node(directory / "node-a")
    replica = _data_node(directory / "node-b", replica_of=primary.port)
    group = SentinelGroup([primary, replica], [])
    try:
        primary.start()
        replica.start()
        for n in range(3):
            sentinel = _sentinel(directory / f"sentinel-{n}", primary.port)
            group.sentinels.append(sentinel)
            sentinel.start()
        _until(lambda: all(_peers(s) == 2 for s in group.sentinels), "sentinels found each other")
        group.wait_settled()
        yield group
    finally:
        group.stop()


def _peers(sentinel: Process) -> int:
    """How many other sentinels ``sentinel`` knows."""
    with sentinel.client() as client:
        return int(client.sentinel_master(SERVICE)["num-other-sentinels"])
