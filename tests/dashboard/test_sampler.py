"""The throughput history the dashboard server keeps: rates from two looks at the app,
each the growth of a count that only grows over the time between the two reads."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runnel_dashboard.history import History
from runnel_dashboard.sampler import Sampler, StreamCounts, processed_rate, rate


def look(
    appended: int | None,
    lag: int | None,
    pending: int,
    finished: tuple[int, int, int] | None,
    read_at: float,
    lost: int = 0,
) -> dict[str, Any]:
    """A snapshot as the server takes it: one processor of two partitions, the job
    queue's totals (succeeded, retried, dead), read at ``read_at``."""
    jobs = None
    if finished is not None:
        succeeded, retried, dead = finished
        jobs = {"totals": {"succeeded": succeeded, "retried": retried, "dead": dead}}
    return {
        "read_at": read_at,
        "processors": [
            {
                "name": "tally",
                "appended": appended,
                "partitions": [
                    {"number": 0, "lag": lag, "pending": 0, "lost": lost, "state": "owned"},
                    {"number": 1, "lag": 0, "pending": pending, "lost": 0, "state": "owned"},
                ],
            }
        ],
        "jobs": jobs,
    }


def test_rates_between_two_looks_are_over_the_time_between_their_reads() -> None:
    sampler = Sampler()
    first = sampler.add(look(100, 10, 5, (3, 1, 0), read_at=1000.2), at=1000.0)
    assert (first.jobs_per_second, first.processed, first.backlog, first.interval) == (
        None,
        {"tally": None},
        {"tally": 15},
        None,
    )
    # 40 arrived, the backlog shrank by 5: 45 acknowledged in the 4 s between the reads
    # (the samples' own times are 5 s apart). 12 tries finished: 8 succeeded, 2 retried,
    # 2 dead.
    second = sampler.add(look(140, 8, 2, (11, 3, 2), read_at=1004.2), at=1005.0)
    assert second.interval == 4.0
    assert second.processed == {"tally": 45 / 4}
    assert second.jobs_per_second == 3.0
    assert second.backlog == {"tally": 10}


def test_events_lost_to_trimming_are_not_counted_as_processed() -> None:
    sampler = Sampler()
    sampler.add(look(100, 10, 0, None, read_at=0.0), at=0.0)
    # 30 arrived, 20 of them trimmed unread: the lag fell by 20 without a delivery.
    second = sampler.add(look(130, 15, 0, None, read_at=5.0, lost=20), at=5.0)
    assert second.processed == {"tally": (30 - 5 - 20) / 5}


def test_an_unknown_or_reset_count_leaves_a_gap_and_old_samples_go() -> None:
    sampler = Sampler(keep=3)
    for i in range(5):
        sampler.add(look(None, 0, 0, None, read_at=float(i)), at=float(i))
    samples = sampler.as_json()
    assert [s["at"] for s in samples] == [2.0, 3.0, 4.0]
    assert all(s["processed"] == {"tally": None} for s in samples)
    assert all(s["jobs_per_second"] is None for s in samples)  # an app without jobs
    sampler.add(look(50, None, 0, (9, 0, 0), read_at=5.0), at=5.0)
    unknown_lag = sampler.add(look(60, None, 0, (10, 0, 0), read_at=6.0), at=6.0)
    assert unknown_lag.processed == {"tally": None}
    assert unknown_lag.jobs_per_second == 1.0
    # The stream and the queue's totals were deleted: lower counts say nothing.
    reset = sampler.add(look(3, 0, 0, (0, 0, 0), read_at=7.0), at=7.0)
    assert (reset.processed, reset.jobs_per_second) == ({"tally": None}, None)


def test_rate() -> None:
    assert rate(10, 25, 5.0) == 3.0
    assert rate(10, 10, 5.0) == 0.0
    assert rate(None, 10, 5.0) is None
    assert rate(10, None, 5.0) is None
    assert rate(10, 9, 5.0) is None  # reset
    assert rate(10, 20, 0.0) is None


# A count that only grows, read at increasing times: (seconds since the read before,
# growth since then).
reads = st.lists(
    st.tuples(
        st.floats(min_value=0.001, max_value=1000, allow_nan=False),
        st.integers(min_value=0, max_value=10_000),
    ),
    min_size=1,
    max_size=50,
)


@given(start=st.integers(min_value=0, max_value=10**12), steps=reads)
def test_rates_give_back_each_intervals_count_and_the_total(
    start: int, steps: list[tuple[float, int]]
) -> None:
    count, at = start, 1_700_000_000.0
    total = 0.0
    for seconds, grown in steps:
        before, before_at = count, at
        count, at = count + grown, at + seconds
        got = rate(before, count, at - before_at)
        assert got is not None and got >= 0
        # The rate is the interval's own count over the interval's own time: no
        # interval borrows from another (0 only where nothing happened in it).
        assert math.isclose(got * (at - before_at), grown, rel_tol=1e-9, abs_tol=1e-6)
        assert (got == 0) == (grown == 0)
        total += got * (at - before_at)
    assert math.isclose(total, count - start, rel_tol=1e-9, abs_tol=1e-3)


@given(
    steps=st.lists(
        st.tuples(
            st.floats(min_value=0.01, max_value=100, allow_nan=False),
            st.integers(min_value=0, max_value=1000),  # arrived
            st.integers(min_value=0, max_value=1000),  # acknowledged
            st.integers(min_value=0, max_value=1000),  # lost
        ),
        min_size=1,
        max_size=30,
    ),
)
def test_processed_is_what_was_acknowledged_whatever_the_trimming(
    steps: list[tuple[float, int, int, int]],
) -> None:
    # The stream's length (capped, trimmed) plays no part: only counts that grow do.
    appended, waiting, lost, at = 0, 0, 0, 0.0
    for seconds, arrived, acked, dropped in steps:
        before = StreamCounts(appended, waiting, lost)
        # What can be acknowledged or lost is what waits (with what just arrived).
        acked = min(acked, waiting + arrived)
        dropped = min(dropped, waiting + arrived - acked)
        appended += arrived
        waiting += arrived - acked - dropped
        lost += dropped
        at += seconds
        got = processed_rate(before, StreamCounts(appended, waiting, lost), seconds)
        assert got is not None
        assert math.isclose(got * seconds, acked, rel_tol=1e-9, abs_tol=1e-6)


def test_the_history_counts_dead_letters_and_failed_tries_from_counts_that_only_grow() -> None:
    """A purge lowers the letters a sink holds, not the letters ever appended to it; the
    failed tries come from the store's totals, read with the snapshot."""
    history = History(app=None, every=5.0, hours=1.0)  # type: ignore[arg-type]
    first = history.sample(look(0, 0, 0, (0, 0, 0), read_at=10.0), {"pings": (7, 7)}, 10.0, 10.5)
    assert (first["dead_letters_per_second"], first["job_failures_per_second"]) == (
        {"pings": None},
        None,
    )
    # 3 more letters, 8 purged: the sink holds 2. 4 tries failed: 3 retried, 1 dead.
    later = history.sample(look(0, 0, 0, (5, 3, 1), read_at=12.0), {"pings": (2, 10)}, 15.0, 16.5)
    assert later["dead_letters"] == {"pings": 2}
    assert later["dead_letters_per_second"] == {"pings": 3 / 6}
    assert later["job_failures_per_second"] == 4 / 2
    assert (later["interval"], later["read_at"], later["jobs_per_second"]) == (2.0, 12.0, 9 / 2)
