"""The throughput history the dashboard server keeps: rates from two looks at the app."""

from __future__ import annotations

from typing import Any

from runnel_dashboard.sampler import Sampler


def look(length: int | None, lag: int, pending: int, done: dict[str, int]) -> dict[str, Any]:
    """A snapshot as the server takes it: one processor of two partitions, job executors."""
    return {
        "processors": [
            {
                "name": "tally",
                "length": length,
                "partitions": [
                    {"number": 0, "lag": lag, "pending": 0},
                    {"number": 1, "lag": None, "pending": pending},
                ],
            }
        ],
        "jobs": {"executors": [{"id": ex, "done": n, "failed": 0} for ex, n in done.items()]},
    }


def test_rates_between_two_looks() -> None:
    sampler = Sampler()
    first = sampler.add(look(100, 10, 5, {"a": 3}), at=1000.0)
    assert (first.jobs_per_second, first.processed, first.backlog) == (
        None,
        {"tally": None},
        {"tally": 15},
    )
    # 40 arrived, the backlog shrank by 5: 45 acknowledged in 5 s. Executor a finished 10
    # more; b is new and counts from zero.
    second = sampler.add(look(140, 8, 2, {"a": 13, "b": 5}), at=1005.0)
    assert second.processed == {"tally": 9.0}
    assert second.jobs_per_second == 3.0
    assert second.backlog == {"tally": 10}


def test_a_store_that_cannot_count_leaves_gaps_and_old_samples_go() -> None:
    sampler = Sampler(keep=3)
    for i in range(5):
        sampler.add(look(None, 0, 0, {}), at=float(i))
    samples = sampler.as_json()
    assert [s["at"] for s in samples] == [2.0, 3.0, 4.0]
    assert all(s["processed"] == {"tally": None} for s in samples)
    assert [s["jobs_per_second"] for s in samples] == [0.0, 0.0, 0.0]
