"""ExceptionPolicy.RETRY's delays, as a pure function, and its processor options."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runnel import App, ExceptionPolicy, Record
from runnel.exceptions import Misconfigured
from runnel.processing.failures import retry_delay

attempts = st.integers(min_value=1, max_value=10_000)
bases = st.floats(min_value=1e-4, max_value=100)
caps = st.floats(min_value=1e-4, max_value=10_000)
fractions = st.floats(min_value=0, max_value=1)
draws = st.floats(min_value=0, max_value=1, exclude_max=True)


@given(attempts, bases, caps)
def test_without_jitter_it_doubles_until_the_cap(attempt: int, base: float, cap: float) -> None:
    delay = retry_delay(attempt, base, cap)
    assert 0 < delay <= cap
    assert delay == min(cap, base * 2.0 ** min(attempt - 1, 64))
    assert retry_delay(attempt + 1, base, cap) >= delay


@given(attempts, bases, caps, fractions, draws)
def test_jitter_only_shortens_and_by_at_most_its_fraction(
    attempt: int, base: float, cap: float, jitter: float, draw: float
) -> None:
    nominal = retry_delay(attempt, base, cap)
    delay = retry_delay(attempt, base, cap, jitter, rand=lambda: draw)
    assert nominal * (1 - jitter) - 1e-12 <= delay <= nominal


def test_first_delays() -> None:
    assert [retry_delay(a, 0.5, 3) for a in range(1, 6)] == [0.5, 1, 2, 3, 3]
    with pytest.raises(ValueError):
        retry_delay(0, 0.5, 3)


class Ping(Record):
    key: str


def test_processor_options_and_their_defaults() -> None:
    app = App(name="t", redis_url="redis://127.0.0.1:1", default_event_retries=7)
    pings = app.stream("pings", record=Ping, partition_by="key")

    @app.processor(pings, exception_policy="retry")
    async def a(events): ...

    @app.processor(pings, exception_policy="retry", retries=2, retry_backoff=1, fallback="ignore")
    async def b(events): ...

    assert (a.__runnel_processor__.retries, a.__runnel_processor__.fallback) == (
        7,
        ExceptionPolicy.HALT,
    )
    proc = b.__runnel_processor__
    assert (proc.retries, proc.retry_backoff, proc.fallback) == (2, 1, ExceptionPolicy.IGNORE)
    assert app.settings.default_retries == 3, "the job queue's retries are another setting"


@pytest.mark.parametrize(
    ("options", "message"),
    [({"fallback": "retry"}, "fallback"), ({"retries": -1}, "retries")],
)
def test_bad_retry_options_are_refused(options: dict, message: str) -> None:
    app = App(name="t", redis_url="redis://127.0.0.1:1")
    pings = app.stream("pings", record=Ping, partition_by="key")
    with pytest.raises(Misconfigured, match=message):

        @app.processor(pings, exception_policy="retry", **options)
        async def a(events): ...
