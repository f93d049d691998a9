"""A backlog bigger than a partition's size, with real processes: ``runnel sendmany`` of
200,000 events into a 4-partition stream (default ``partition_size`` 50,000) while a slow
worker runs, most of them to one partition.

By default nothing is trimmed before the processor acknowledged it: the sender waits for
room, and the worker processes every event once, in order per key. With
``on_full="drop_oldest"`` the cap wins, and every event trimmed unread is counted: the
events processed plus those ``runnel status`` reports lost are exactly the events sent.
"""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

import pytest
import redis

from tests.support.processes import WorkerProcess, cli, env_with, wait_for

EVENTS = 200_000

APP = """
import asyncio
import os

import redis

from runnel import App, Record

app = App(name={name!r})


class Order(Record):
    customer: str
    n: int


orders = app.stream("orders", record=Order, partition_by="customer", partition_count=4)
_client = redis.Redis.from_url(os.environ["TEST_RECORD_URL"])


@app.processor(orders)
async def slow(events):
    async for batch in events.take(50, within=0.05).records():
        _client.rpush("seen", *[f"{{o.customer}}:{{o.n}}" for o in batch])
        await asyncio.sleep(0.01)
"""


def _orders(path: Path) -> list[tuple[str, int]]:
    """Half of the events to one customer (one partition gets over 100,000), the rest
    spread over 50 others."""
    rng = random.Random(7)
    sent = [("big" if rng.random() < 0.5 else f"c{rng.randrange(50)}", n) for n in range(EVENTS)]
    path.write_text("".join(json.dumps({"customer": c, "n": n}) + "\n" for c, n in sent))
    return sent


def _groups(client: redis.Redis, app_name: str) -> list[dict[str, object]]:
    return [
        group
        for n in range(4)
        if client.exists(key := f"__strm:{app_name}.orders.{n}")
        for group in client.xinfo_groups(key)
    ]


def _idle(client: redis.Redis, app_name: str) -> bool:
    groups = _groups(client, app_name)
    return len(groups) == 4 and all(g["lag"] == 0 and g["pending"] == 0 for g in groups)


@pytest.fixture
def setup(tmp_path: Path, redis_url: str, app_name: str) -> tuple[Path, Path, list]:
    (tmp_path / "overflow.py").write_text(textwrap.dedent(APP.format(name=app_name)))
    lines = tmp_path / "orders.jsonl"
    return tmp_path, lines, _orders(lines)


def _seen(client: redis.Redis) -> list[tuple[str, int]]:
    out = []
    for raw in client.lrange("seen", 0, -1):
        customer, n = raw.decode().rsplit(":", 1)
        out.append((customer, int(n)))
    return out


def test_a_full_partition_makes_the_sender_wait_and_nothing_is_lost(
    setup: tuple[Path, Path, list], redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    cwd, lines, sent = setup
    env = env_with(redis_url, TEST_RECORD_URL=redis_url, RUNNEL_FULL_TIMEOUT="600")
    with WorkerProcess("overflow:app", cwd, env) as worker:
        wait_for(lambda: len(_groups(redis_client, app_name)) == 4)
        done = cli("sendmany", "overflow:orders", str(lines), cwd=cwd, env=env, timeout=900)
        assert done.returncode == 0, done.stderr
        wait_for(lambda: _idle(redis_client, app_name), timeout=600)
        assert worker.stop() == 0
    seen = _seen(redis_client)
    assert sorted(seen) == sorted(sent)  # every event once
    for customer in {c for c, _ in sent}:  # in order per key
        ns = [n for c, n in seen if c == customer]
        assert ns == sorted(ns)
    lengths = [redis_client.xlen(f"__strm:{app_name}.orders.{n}") for n in range(4)]
    assert max(lengths) > 50_000 // 2  # the big partition was really held at its size
    assert "full with events processor 'slow' has not acknowledged" in done.stderr
    status = json.loads(cli("status", "overflow:app", "--json", cwd=cwd, env=env).stdout)
    assert [p["lost"] for p in status["processors"][0]["partitions"]] == [0, 0, 0, 0]


def test_with_drop_oldest_every_event_trimmed_unread_is_counted(
    setup: tuple[Path, Path, list], redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    cwd, lines, _ = setup
    env = env_with(redis_url, TEST_RECORD_URL=redis_url, RUNNEL_DEFAULT_ON_FULL="drop_oldest")
    with WorkerProcess("overflow:app", cwd, env) as worker:
        wait_for(lambda: len(_groups(redis_client, app_name)) == 4)
        done = cli("sendmany", "overflow:orders", str(lines), cwd=cwd, env=env, timeout=900)
        assert done.returncode == 0, done.stderr
        wait_for(lambda: _idle(redis_client, app_name), timeout=600)
        status = json.loads(cli("status", "overflow:app", "--json", cwd=cwd, env=env).stdout)
        lost = sum(p["lost"] for p in status["processors"][0]["partitions"])
        wait_for(lambda: "were trimmed before it read them" in worker.output, timeout=120)
        assert worker.stop() == 0
    seen = _seen(redis_client)
    assert len(set(seen)) == len(seen)  # nothing twice
    assert lost > 0
    assert len(seen) + lost == EVENTS  # exactly: what was not processed is counted lost
    table = cli("status", "overflow:app", cwd=cwd, env=env).stdout
    assert f"lost {lost}" in table.replace(",", "") or str(lost) in table
