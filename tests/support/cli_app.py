"""A small app module for driving the real `runnel` command line, and reading back what ran.

The module (``appmod.py`` in ``tmp_path``) declares an App named after the test, a
``Ping`` record partitioned by ``key``, a ``pings`` stream and two processors, ``a`` and
``b``. Each processor RPUSHes ``"key:n"`` for every event it finishes to the Redis list
``seen:a`` / ``seen:b`` with a plain redis client, so the test can read back what ran.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import redis

from tests.support.processes import cli, env_with

MODULE = "appmod"

APP_SOURCE = """
import asyncio
import os

import redis

from runnel import App, Record

app = App(name={app_name!r}{app_kwargs})


class Ping(Record):
    key: str
    n: int


pings = app.stream("pings", record=Ping, partition_by="key", partition_count={partitions})

DELAY = float(os.environ.get("TEST_DELAY", "0"))
_client = None


def client():
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ["TEST_RECORD_URL"])
    return _client


@app.processor(pings)
async def a(events):
    async for ping in events.records():
        if DELAY:
            await asyncio.sleep(DELAY)
        client().rpush("seen:a", f"{{ping.key}}:{{ping.n}}")


@app.processor(pings)
async def b(events):
    async for ping in events.records():
        client().rpush("seen:b", f"{{ping.key}}:{{ping.n}}")
"""


def write_app(
    directory: Path,
    app_name: str,
    *,
    partitions: int = 4,
    app_kwargs: str = "",
    module: str = MODULE,
) -> Path:
    path = directory / f"{module}.py"
    path.write_text(
        textwrap.dedent(
            APP_SOURCE.format(app_name=app_name, app_kwargs=app_kwargs, partitions=partitions)
        )
    )
    return path


def pings(count: int, keys: int) -> list[dict[str, object]]:
    """``count`` events spread round-robin over ``keys`` keys, numbered 0..count-1."""
    return [{"key": f"k{i % keys}", "n": i} for i in range(count)]


def jsonl(events: Iterable[dict[str, object]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def by_key(items: Iterable[str]) -> dict[str, list[int]]:
    """``["k0:0", "k1:1", ...]`` -> ``{"k0": [0, ...], "k1": [1, ...]}`` in list order."""
    out: dict[str, list[int]] = {}
    for item in items:
        key, _, n = item.rpartition(":")
        out.setdefault(key, []).append(int(n))
    return out


def expected_by_key(events: Iterable[dict[str, object]]) -> dict[str, list[int]]:
    return by_key(f"{e['key']}:{e['n']}" for e in events)


@dataclass
class Project:
    """A directory holding the app module, and how to run `runnel` there."""

    dir: Path
    app_name: str
    redis_url: str
    client: redis.Redis

    @property
    def env(self) -> dict[str, str]:
        return env_with(self.redis_url, TEST_RECORD_URL=self.redis_url)

    def env_with(self, **extra: str) -> dict[str, str]:
        return {**self.env, **extra}

    def run(self, *args: str, input: str | None = None, env: dict[str, str] | None = None):
        return cli(*args, cwd=self.dir, env=env or self.env, input=input)

    def seen(self, processor: str = "a") -> list[str]:
        return [x.decode() for x in self.client.lrange(f"seen:{processor}", 0, -1)]

    def partition_keys(self, stream: str = "pings", count: int = 4) -> list[str]:
        return [f"__strm:{self.app_name}.{stream}.{n}" for n in range(count)]

    def stream_length(self, stream: str = "pings", count: int = 4) -> int:
        return sum(self.client.xlen(k) for k in self.partition_keys(stream, count))

    def entries(self, stream: str = "pings", count: int = 4) -> dict[bytes, str]:
        """Every stored event as ``{stream id: "key:n"}`` (JSON-serialized records)."""
        out = {}
        for key in self.partition_keys(stream, count):
            for xid, fields in self.client.xrange(key):
                data = json.loads(fields[b"data"])
                out[xid] = f"{data['key']}:{data['n']}"
        return out

    def pending_events(self, processor: str, stream: str = "pings", count: int = 4) -> list[str]:
        """The events read by ``processor``'s group but not acknowledged, as ``"key:n"``."""
        entries = self.entries(stream, count)
        out = []
        for key in self.partition_keys(stream, count):
            if not self.client.exists(key):
                continue
            groups = {g["name"].decode() for g in self.client.xinfo_groups(key)}
            if processor not in groups:
                continue
            for item in self.client.xpending_range(key, processor, "-", "+", 100_000):
                out.append(entries[item["message_id"]])
        return out

    def pending(self, processor: str, stream: str = "pings", count: int = 4) -> int:
        total = 0
        for key in self.partition_keys(stream, count):
            if not self.client.exists(key):
                continue
            groups = {g["name"].decode() for g in self.client.xinfo_groups(key)}
            if processor in groups:
                total += self.client.xpending(key, processor)["pending"]
        return total
