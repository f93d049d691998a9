"""Rate and concurrency limits of a job (``@app.job(rate_limit=..., concurrency_limit=...)``).

Both hold across every worker of the app, since the store keeps them: a worker asks the
store to *admit* a job it has taken before running it (:meth:`JobStore.admit`). Refused,
the job goes back to the schedule, its try not counted, due when a start may be allowed.
Jobs without limits never ask, so they pay nothing for this.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Literal

from runnel.exceptions import Misconfigured

LimitKind = Literal["rate", "concurrency"]

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
MAX_COUNT = 1_000_000
MAX_CONCURRENCY = 100_000
BURST_SHARE = 0.1
"""A rate's burst tolerance, as a share of its period: after a quiet spell, up to a tenth
of the period's starts may come at once (so that a start a few milliseconds late does not
waste its turn)."""
CONCURRENCY_WAIT = (0.2, 0.4)
"""A job refused a concurrency slot is due again after a random wait in this range (s)."""

_RATE = re.compile(r"(\d+)/(\d*)([smh])")


@dataclass(frozen=True, slots=True)
class Rate:
    """``count`` starts per ``period`` seconds."""

    count: int
    period: float
    text: str

    @property
    def interval_us(self) -> int:
        """Microseconds between two starts at the steady rate."""
        return max(1, round(self.period * 1_000_000 / self.count))

    @property
    def burst_us(self) -> int:
        """How far ahead of its turn a start is allowed (microseconds)."""
        return round(self.period * BURST_SHARE * 1_000_000)


@dataclass(frozen=True, slots=True)
class JobLimits:
    """A job's limits (None: no limit of that kind)."""

    rate: Rate | None = None
    concurrency: int | None = None

    def describe(self) -> str:
        parts = []
        if self.rate is not None:
            parts.append(f"rate_limit={self.rate.text}")
        if self.concurrency is not None:
            parts.append(f"concurrency_limit={self.concurrency}")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Deferral:
    """An admission refused: the job is back on the schedule, due at ``due``."""

    limit: LimitKind
    due: float


GONE = "gone"
"""What :meth:`JobStore.admit` returns when the delivery is no longer this executor's (it
was cancelled, or taken back): the job must not run here."""


def parse_rate(value: object) -> Rate:
    """``"N/s"``, ``"N/m"``, ``"N/h"``, or with a number of units: ``"N/10s"``."""
    if not isinstance(value, str):
        raise Misconfigured(f"rate_limit must be a string such as '100/s', not {value!r}")
    found = _RATE.fullmatch(value.strip())
    if found is None:
        raise Misconfigured(
            f"rate_limit {value!r} is not N/s, N/m or N/h (or N/10s: N per 10 seconds)"
        )
    count, many, unit = int(found[1]), int(found[2] or 1), found[3]
    if not 1 <= count <= MAX_COUNT:
        raise Misconfigured(f"rate_limit {value!r}: the count must be from 1 to {MAX_COUNT}")
    if many < 1:
        raise Misconfigured(f"rate_limit {value!r}: the period must be at least 1{unit}")
    return Rate(count, many * UNITS[unit], value.strip())


def parse_limits(rate_limit: object, concurrency_limit: object) -> JobLimits | None:
    """The limits ``@app.job`` was given, checked; None when there are none."""
    rate = None if rate_limit is None else parse_rate(rate_limit)
    if concurrency_limit is not None and (
        not isinstance(concurrency_limit, int)
        or isinstance(concurrency_limit, bool)
        or not 1 <= concurrency_limit <= MAX_CONCURRENCY
    ):
        raise Misconfigured(
            f"concurrency_limit must be an integer from 1 to {MAX_CONCURRENCY}, "
            f"not {concurrency_limit!r}"
        )
    if rate is None and concurrency_limit is None:
        return None
    return JobLimits(rate, concurrency_limit)


def concurrency_wait() -> float:
    """Seconds until a job refused a slot is due again (random, so that the jobs refused
    together do not all come back at once)."""
    return random.uniform(*CONCURRENCY_WAIT)
