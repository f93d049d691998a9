"""An app whose partitions lie on every master of the test cluster, for the command line,
dashboard and full-memory tests.

Which master holds a partition depends only on the app's name (the partition's hash tag),
so :func:`spread_name` draws names until the partitions of a stream cover every master.
The app module is written to a directory and imported in the test process too, so that the
test asks the app itself which partition a record key goes to.
"""

from __future__ import annotations

import importlib.util
import json
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis

from runnel_redis.layout import Cluster
from tests.support.processes import cli, env_with
from tests.support.redis_cluster import RedisClusterProcesses

LAYOUT = Cluster()


def masters_of(
    cluster: RedisClusterProcesses, app: str, stream: str, partitions: int
) -> dict[int, int]:
    """{partition number: port of the master that holds it}."""
    return {n: cluster.master_of(LAYOUT.partition(app, stream, n)).port for n in range(partitions)}


def spread_name(cluster: RedisClusterProcesses, stream: str, partitions: int) -> str:
    """A fresh app name whose ``stream`` has partitions on every master."""
    masters = {node.port for node in cluster.masters()}
    for _ in range(1000):
        name = f"c{uuid.uuid4().hex[:8]}"
        if set(masters_of(cluster, name, stream, partitions).values()) == masters:
            return name
    raise AssertionError("no app name spreads the partitions over every master")


@dataclass
class SpreadApp:
    """The app module ``module_name`` in ``dir``, on the cluster; its processors record
    what they do in the plain Redis at ``record_url``."""

    dir: Path
    name: str
    cluster: RedisClusterProcesses
    record_url: str
    module_name: str
    stream: str = "pings"
    partitions: int = 6
    module: ModuleType = field(init=False)
    record: redis.Redis = field(init=False)

    def write(self, source: str, monkeypatch: Any) -> SpreadApp:
        """Write the module (``source`` formatted with name and partitions) and import it."""
        monkeypatch.setenv("RUNNEL_REDIS_URL", self.cluster.url)
        monkeypatch.setenv("TEST_RECORD_URL", self.record_url)
        path = self.dir / f"{self.module_name}.py"
        path.write_text(textwrap.dedent(source.format(name=self.name, partitions=self.partitions)))
        spec = importlib.util.spec_from_file_location(f"{self.module_name}_{self.name}", path)
        assert spec is not None and spec.loader is not None
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        self.record = redis.Redis.from_url(self.record_url)
        return self

    @property
    def env(self) -> dict[str, str]:
        return env_with(self.cluster.url, TEST_RECORD_URL=self.record_url)

    def run(self, *args: str, input: str | None = None) -> Any:
        return cli(*args, cwd=self.dir, env=self.env, input=input)

    def target(self, name: str) -> str:
        return f"{self.module_name}:{name}"

    def masters(self) -> dict[int, int]:
        """{partition number: port of its master}."""
        return masters_of(self.cluster, self.name, self.stream, self.partitions)

    def partition_of(self, key: str) -> int:
        return int(getattr(self.module, self.stream).hash(key))

    def key_per_master(self) -> dict[int, tuple[str, int]]:
        """{master port: (a record key, its partition)}, one key for each master."""
        masters = self.masters()
        out: dict[int, tuple[str, int]] = {}
        for i in range(10_000):
            key = f"k{i}"
            number = self.partition_of(key)
            out.setdefault(masters[number], (key, number))
            if len(out) == len(set(masters.values())):
                return out
        raise AssertionError("no record key for some master")

    def key_per_partition(self) -> list[str]:
        """A record key for each partition, by partition number."""
        out: dict[int, str] = {}
        for i in range(10_000):
            out.setdefault(self.partition_of(f"k{i}"), f"k{i}")
            if len(out) == self.partitions:
                return [out[n] for n in range(self.partitions)]
        raise AssertionError("no record key for some partition")

    def partition_key(self, number: int) -> str:
        return LAYOUT.partition(self.name, self.stream, number)

    def node_client(self, number: int) -> redis.Redis:
        """A plain connection to the master holding partition ``number``."""
        return self.cluster.node(self.masters()[number]).client()

    def group_info(self, number: int, group: str) -> dict[str, Any] | None:
        """XINFO GROUPS of one partition, asked of its own master."""
        with self.node_client(number) as client:
            for info in client.xinfo_groups(self.partition_key(number)):
                if info["name"].decode() == group:
                    return dict(info)
        return None

    def listed(self, name: str) -> list[str]:
        return [x.decode() for x in self.record.lrange(name, 0, -1)]

    def send(self, key: str, n: int) -> str:
        done = self.run("send", self.target(self.stream), json.dumps({"key": key, "n": n}))
        assert done.returncode == 0, done.stderr
        return str(done.stdout.split()[-1])

    def status(self, app: str = "app") -> dict[str, Any]:
        done = self.run("status", self.target(app), "--json")
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    def partitions_of(self, processor: str) -> dict[int, dict[str, Any]]:
        """{number: the partition as `runnel status --json` shows it} for ``processor``."""
        (proc,) = [p for p in self.status()["processors"] if p["name"] == processor]
        return {p["number"]: p for p in proc["partitions"]}

    def close(self) -> None:
        self.record.close()


def spread_fixture(source: str, module_name: str, partitions: int = 6) -> Any:
    """A ``spread`` fixture: the app module ``source`` (see :meth:`SpreadApp.write`) under a
    fresh name whose partitions lie on every master, recording into ``redis_url``."""

    @pytest.fixture
    def spread(
        redis_cluster: RedisClusterProcesses,
        redis_url: str,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> Iterator[SpreadApp]:
        name = spread_name(redis_cluster, "pings", partitions)
        app = SpreadApp(tmp_path, name, redis_cluster, redis_url, module_name)
        yield app.write(source, monkeypatch)
        app.close()

    return spread
