"""A real Redis Cluster of redis-server processes on free ports, for the cluster tests.

:func:`start_cluster` starts the processes in a temporary directory, joins them with
``redis-cli --cluster create`` and waits until every node reports ``cluster_state:ok`` and
agrees on who serves every slot. :class:`RedisClusterProcesses` then offers what the
failover and resharding tests need: kill the master of a key (its replica takes over),
bring a killed node back (it rejoins as a replica), move a key's slot to another master
(step by step, so a test can stop half-way and see ASK), or reshard many slots with
``redis-cli --cluster reshard``.

The session fixtures that start the clusters are tests/conftest.py's. ``redis_url`` and
``app_name`` here are for a suite written for a single Redis and run again on the cluster:
import them next to the tests (``from tests.support.redis_cluster import app_name,
redis_url``) and the test bodies get the cluster's URL and a fresh app name each.

Timeouts here only bound a hung fixture; no test asserts on how long anything took.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot

from runnel.exceptions import Misconfigured
from runnel_redis.embedded import find_binary
from tests.support.ports import free_port

HOST = "127.0.0.1"
NODE_TIMEOUT_MS = 1000
"""cluster-node-timeout: how long a silent master is given before its replica takes over."""
SETTLE = 30.0
"""Upper bound for the cluster to reach an expected state; reaching it means it hung."""
SLOTS = 16384


class ClusterError(RuntimeError):
    """The cluster did not reach the state a helper waited for."""


def binaries() -> tuple[str, str]:
    """redis-server as every fixture finds it (a system one first), and the redis-cli
    beside it (else the first on PATH), so that both come from one Redis version."""
    server = find_binary()
    beside = Path(server).with_name("redis-cli")
    cli = str(beside) if beside.is_file() else shutil.which("redis-cli")
    if cli is None:
        raise Misconfigured("redis-cli not found (Debian package redis-tools)")
    return server, cli


def missing_tools() -> str | None:
    """Why a cluster cannot be started here (None when it can)."""
    try:
        binaries()
    except Misconfigured as error:
        return f"no Redis Cluster tests: {error}"
    return None


@dataclass
class Node:
    """One redis-server process of the cluster."""

    port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    node_id: str = ""

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def client(self) -> redis.Redis:
        """A plain (non-cluster) connection to this node alone."""
        return redis.Redis(host=HOST, port=self.port, socket_timeout=5)

    def command(self, *args: object) -> object:
        with self.client() as client:
            return client.execute_command(*args)

    def start(self) -> None:
        """Start (or restart, with its nodes.conf) this node's redis-server."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "redis.log", "ab") as log:  # the child keeps its own copy
            self.process = subprocess.Popen(
                [
                    binaries()[0],
                    "--port", str(self.port),
                    "--bind", HOST,
                    "--dir", str(self.directory),
                    "--cluster-enabled", "yes",
                    "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                    "--appendonly", "no",
                    "--save", "",
                    "--repl-diskless-sync-delay", "0",
                    "--protected-mode", "no",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        _until(self._answers, f"{self.address} did not start")
        self.node_id = str(_text(self.command("CLUSTER", "MYID")))

    def _answers(self) -> bool:
        if not self.alive:
            log = (self.directory / "redis.log").read_text(errors="replace")
            raise ClusterError(f"redis-server on {self.address} exited:\n{log[-2000:]}")
        try:
            return bool(self.command("PING"))
        except redis.ConnectionError:
            return False

    def kill(self) -> None:
        """SIGKILL: no shutdown, no goodbye to the other nodes."""
        if self.process is not None and self.alive:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def view(self) -> list[NodeLine]:
        """This node's CLUSTER NODES: how it sees every node of the cluster."""
        return [
            NodeLine.parse(line) for line in _text(self.command("CLUSTER", "NODES")).splitlines()
        ]


@dataclass
class NodeLine:
    """One line of CLUSTER NODES."""

    node_id: str
    port: int
    flags: set[str]
    master_id: str
    slots: set[int] = field(default_factory=set)

    @classmethod
    def parse(cls, line: str) -> NodeLine:
        parts = line.split()
        port = int(parts[1].split("@")[0].rsplit(":", 1)[1])
        slots: set[int] = set()
        for item in parts[8:]:
            if item.startswith("["):  # a slot being imported or migrated, not yet served
                continue
            first, _, last = item.partition("-")
            slots.update(range(int(first), int(last or first) + 1))
        return cls(parts[0], port, set(parts[2].split(",")), parts[3], slots)

    @property
    def master(self) -> bool:
        return "master" in self.flags and not self.flags & {"fail", "fail?", "noaddr"}


@dataclass
class RedisClusterProcesses:
    """A running Redis Cluster: its nodes, its URL, and helpers to break and move it."""

    nodes: list[Node]
    replicas: int

    @property
    def url(self) -> str:
        """The Runnel URL of the cluster: any one node is enough to find the others."""
        seed = next(node for node in self.nodes if node.alive)
        return f"redis+cluster://{seed.address}"

    @property
    def redis_url(self) -> str:
        """The same seed as a URL redis-py's RedisCluster.from_url takes."""
        return self.url.replace("redis+cluster://", "redis://", 1)

    def alive(self) -> list[Node]:
        return [node for node in self.nodes if node.alive]

    def node(self, port: int) -> Node:
        return next(node for node in self.nodes if node.port == port)

    def masters(self) -> list[Node]:
        """The live masters, as the first live node sees them."""
        lines = self.alive()[0].view()
        ports = {line.port for line in lines if line.master and line.slots}
        return [node for node in self.alive() if node.port in ports]

    def master_of_slot(self, slot: int) -> Node:
        for line in self.alive()[0].view():
            if line.master and slot in line.slots:
                return self.node(line.port)
        raise ClusterError(f"no live master serves slot {slot}")

    def master_of(self, key: str | bytes) -> Node:
        """The master serving a key's slot."""
        return self.master_of_slot(key_slot(_bytes(key)))

    def replicas_of(self, master: Node) -> list[Node]:
        lines = self.alive()[0].view()
        ports = {line.port for line in lines if line.master_id == master.node_id}
        return [node for node in self.alive() if node.port in ports]

    def flush(self) -> None:
        """Empty every master (the replicas follow)."""
        for master in self.masters():
            master.command("FLUSHALL")

    # -- waiting ----------------------------------------------------------------------

    def wait_ok(self) -> None:
        """Until every live node says cluster_state:ok and all agree on every slot's master."""
        _until(self._agreed, f"cluster on {[n.port for n in self.nodes]} did not settle")

    def _agreed(self) -> bool:
        owners: dict[int, int] | None = None
        for node in self.alive():
            try:
                info = _text(node.command("CLUSTER", "INFO"))
                lines = node.view()
            except redis.ConnectionError:
                return False
            if "cluster_state:ok" not in info or f"cluster_slots_ok:{SLOTS}" not in info:
                return False
            seen = {s: line.port for line in lines if line.master for s in line.slots}
            if len(seen) != SLOTS or any(not self.node(p).alive for p in set(seen.values())):
                return False
            if owners is not None and seen != owners:
                return False
            owners = seen
        return True

    # -- failover ---------------------------------------------------------------------

    def kill_master_of(self, key: str | bytes) -> Node:
        """SIGKILL the master of a key's slot; return once a replica has taken it over.

        Needs a cluster with replicas. The killed node stays down until :meth:`revive`.
        """
        master = self.master_of(key)
        if not self.replicas_of(master):
            raise ClusterError(f"{master.address} has no replica to take over")
        master.kill()
        _until(
            lambda: self._serves_elsewhere(key_slot(_bytes(key)), master),
            f"no replica took over from {master.address}",
        )
        self.wait_ok()
        return master

    def _serves_elsewhere(self, slot: int, gone: Node) -> bool:
        try:
            return self.master_of_slot(slot).port != gone.port
        except (ClusterError, redis.ConnectionError):
            return False

    def revive(self, node: Node) -> None:
        """Restart a killed node; it rejoins (as a replica of whoever took its slots)."""
        node.start()
        _until(lambda: self._knows_again(node), f"{node.address} did not rejoin")
        self.wait_ok()
        self.wait_replicas_synced()

    def _knows_again(self, node: Node) -> bool:
        for other in self.alive():
            line = next(line for line in other.view() if line.port == node.port)
            if line.flags & {"fail", "fail?"}:
                return False
        return True

    def wait_replicas_synced(self) -> None:
        """Until every live replica's link to its master is up (its first sync is done)."""
        _until(self._synced, "replicas did not finish their first sync")

    def _synced(self) -> bool:
        for node in self.alive():
            with node.client() as client:
                info = client.info("replication")
            if info["role"] == "slave" and info.get("master_link_status") != "up":
                return False
        return True

    def heal(self) -> None:
        """Bring back every killed node, so the next test starts with the full cluster."""
        for node in self.nodes:
            if not node.alive:
                self.revive(node)

    # -- moving slots -----------------------------------------------------------------

    def begin_migration(self, slot: int, to: Node) -> Node:
        """Mark a slot importing on ``to`` and migrating on its master (keys not moved yet).

        While a slot is half moved, its master answers ASK for keys it no longer holds.
        Returns the slot's current master.
        """
        source = self.master_of_slot(slot)
        if source.port == to.port:
            raise ClusterError(f"slot {slot} is on {to.address} already")
        to.command("CLUSTER", "SETSLOT", slot, "IMPORTING", source.node_id)
        source.command("CLUSTER", "SETSLOT", slot, "MIGRATING", to.node_id)
        return source

    def move_keys(self, slot: int, source: Node, to: Node, limit: int | None = None) -> int:
        """MIGRATE (up to ``limit``) keys of a slot from ``source`` to ``to``; how many moved."""
        moved = 0
        while limit is None or moved < limit:
            batch = 100 if limit is None else min(100, limit - moved)
            names = source.command("CLUSTER", "GETKEYSINSLOT", slot, batch)
            assert isinstance(names, list)
            if not names:
                break
            source.command("MIGRATE", HOST, to.port, "", 0, 5000, "KEYS", *names)
            moved += len(names)
        return moved

    def finish_migration(self, slot: int, to: Node) -> None:
        """Assign the slot to ``to`` on every master (its keys must have moved already)."""
        to.command("CLUSTER", "SETSLOT", slot, "NODE", to.node_id)
        for master in self.masters():
            if master.port != to.port:
                master.command("CLUSTER", "SETSLOT", slot, "NODE", to.node_id)
        self.wait_ok()

    def finish_open_migrations(self) -> None:
        """Complete every slot migration a test left half done (towards its target)."""
        for source in self.masters():
            own = _text(source.command("CLUSTER", "NODES"))
            line = next(line for line in own.splitlines() if "myself" in line.split()[2])
            for item in line.split()[8:]:
                if "->-" in item:
                    slot, target_id = item.strip("[]").split("->-")
                    target = next(n for n in self.nodes if n.node_id == target_id)
                    self.move_keys(int(slot), source, target)
                    self.finish_migration(int(slot), target)

    def migrate_slot(self, slot: int, to: Node) -> None:
        """Move one slot with all its keys to another master, the way redis-cli does."""
        source = self.begin_migration(slot, to)
        self.move_keys(slot, source, to)
        self.finish_migration(slot, to)

    def migrate_slot_of(self, key: str | bytes, to: Node) -> None:
        """Move the slot of a key (and every key in it) to another master."""
        self.migrate_slot(key_slot(_bytes(key)), to)

    def reshard(self, slots: int, source: Node, to: Node) -> None:
        """Move ``slots`` slots from one master to another with ``redis-cli --cluster reshard``."""
        _redis_cli(
            "--cluster", "reshard", source.address,
            "--cluster-from", source.node_id,
            "--cluster-to", to.node_id,
            "--cluster-slots", str(slots),
            "--cluster-yes",
        )  # fmt: skip
        self.wait_ok()

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()


@contextlib.contextmanager
def start_cluster(
    directory: Path, masters: int = 3, replicas: int = 0
) -> Iterator[RedisClusterProcesses]:
    """Start, create and wait for a cluster of ``masters * (1 + replicas)`` nodes; stop it after."""
    nodes: list[Node] = []
    cluster = RedisClusterProcesses(nodes, replicas)
    try:
        for _ in range(masters * (1 + replicas)):
            node = Node(free_port(bus=True), directory / f"node{len(nodes)}")
            nodes.append(node)
            node.start()
        _redis_cli(
            "--cluster", "create", *(node.address for node in nodes),
            "--cluster-replicas", str(replicas),
            "--cluster-yes",
        )  # fmt: skip
        cluster.wait_ok()
        if replicas:
            _until(
                lambda: all(len(cluster.replicas_of(m)) == replicas for m in cluster.masters()),
                "replicas did not attach",
            )
            cluster.wait_replicas_synced()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)


def _redis_cli(*args: str) -> str:
    done = subprocess.run(
        [binaries()[1], *args], capture_output=True, text=True, timeout=SETTLE, check=False
    )
    if done.returncode != 0 or "[ERR]" in done.stdout:
        raise ClusterError(f"redis-cli {' '.join(args[:2])} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def _until(check: Callable[[], bool], failure: str) -> None:
    deadline = time.monotonic() + SETTLE
    while not check():
        if time.monotonic() > deadline:
            raise ClusterError(failure)
        time.sleep(0.05)


def _text(reply: object) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)


def _bytes(key: str | bytes) -> bytes:
    return key.encode() if isinstance(key, str) else key


@pytest.fixture
def redis_url(redis_cluster: RedisClusterProcesses) -> str:
    """For a re-run suite: the emptied 3-master cluster's URL in place of the single Redis."""
    return redis_cluster.url


@pytest.fixture
def app_name() -> str:
    return f"t{uuid.uuid4().hex[:10]}"
