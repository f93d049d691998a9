"""Job limits as declared: ``rate_limit`` and ``concurrency_limit`` on ``@app.job``."""

from __future__ import annotations

import pytest

from runnel import App, Misconfigured
from runnel.jobs.limits import JobLimits, Rate, parse_limits, parse_rate


@pytest.mark.parametrize(
    ("text", "count", "period"),
    [
        ("100/s", 100, 1.0),
        ("5/m", 5, 60.0),
        ("2/h", 2, 3600.0),
        ("10/30s", 10, 30.0),
        ("1/5m", 1, 300.0),
        (" 7/s ", 7, 1.0),
    ],
)
def test_rates_parse(text: str, count: int, period: float) -> None:
    rate = parse_rate(text)
    assert (rate.count, rate.period) == (count, period)
    assert rate.interval_us == round(period * 1_000_000 / count)
    assert rate.burst_us == round(period * 100_000)  # a tenth of the period


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("fast", "is not N/s, N/m or N/h"),
        ("10/fortnight", "is not N/s, N/m or N/h"),
        ("10/d", "is not N/s, N/m or N/h"),
        ("-1/s", "is not N/s, N/m or N/h"),
        ("1.5/s", "is not N/s, N/m or N/h"),
        ("", "is not N/s, N/m or N/h"),
        ("0/s", "the count must be from 1 to 1000000"),
        ("1000001/s", "the count must be from 1 to 1000000"),
        ("5/0s", "the period must be at least 1s"),
        (100, "must be a string such as '100/s'"),
    ],
)
def test_bad_rates_are_refused(value: object, says: str) -> None:
    with pytest.raises(Misconfigured, match=says):
        parse_rate(value)


@pytest.mark.parametrize("value", [0, -3, 2.0, "2", True, 100_001])
def test_bad_concurrency_limits_are_refused(value: object) -> None:
    with pytest.raises(Misconfigured, match="concurrency_limit must be an integer from 1"):
        parse_limits(None, value)


def test_no_limits_is_none_and_both_are_kept() -> None:
    assert parse_limits(None, None) is None
    assert parse_limits("3/s", 2) == JobLimits(Rate(3, 1.0, "3/s"), 2)
    assert parse_limits(None, 1) == JobLimits(None, 1)


def test_the_decorator_keeps_the_limits_and_names_the_job_in_errors(app: App) -> None:
    @app.job(rate_limit="50/s", concurrency_limit=5)
    async def paced() -> None: ...

    @app.job
    async def free() -> None: ...

    assert paced.limits == JobLimits(Rate(50, 1.0, "50/s"), 5)
    assert free.limits is None
    with pytest.raises(Misconfigured, match=r"job 'bad': rate_limit '0/s'"):

        @app.job(rate_limit="0/s")
        async def bad() -> None: ...

    assert "bad" not in app.jobs
