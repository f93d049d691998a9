"""The scaling benchmark's steady state (benchmarks/harness.py gated_drain) with real
worker processes on the session's redis-server: the workers share the partitions out
before the backlog is written, so that nothing moves while it drains."""

from __future__ import annotations

import redis

from benchmarks import harness
from benchmarks.common import PARTITIONS, fill


def test_two_gated_workers_drain_their_own_halves(redis_url: str) -> None:
    total = 40 * PARTITIONS
    got = harness.gated_drain(
        redis_url,
        "gated",
        "runnel",
        "g",
        1,
        total,
        2,
        lambda: fill(redis_url, "gated", total, fresh=False),
    )
    # Each owned 8 partitions from before the first entry was written to the end: each
    # processed exactly its half, and nothing twice.
    assert got["per_process"] == [total // 2, total // 2]
    assert got["server"].calls("exec") > 0  # the fenced reads ran in the window


def test_plain_loops_are_released_together(redis_url: str) -> None:
    total = 10 * PARTITIONS
    got = harness.gated_drain(
        redis_url,
        "gated",
        "plain",
        "g",
        8,
        total,
        2,
        lambda: fill(redis_url, "gated", total, fresh=False),
    )
    assert sum(got["per_process"]) == total
    client = redis.Redis.from_url(redis_url)
    assert harness.groups_made(redis_url, "gated", "plain-g")
    client.close()
