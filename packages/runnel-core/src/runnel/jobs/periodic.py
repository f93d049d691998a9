"""Periodic jobs: ``@app.job(cron="*/5 * * * *")``, enqueued once per tick of the schedule
however many workers run (docs/jobs.md, "Periodic jobs").

No worker leads. Every worker that runs the job executor watches the schedules, and when a
tick comes due each one *settles* it: a single store call that moves the job's last settled
tick from the value the worker read to the new tick and, in the same atomic step, enqueues
the job for that tick (a compare-and-set). The first call wins; the others find the last
tick moved and change nothing. A worker killed before its call changed nothing and one
killed after it had done everything, so each tick is enqueued once whoever dies when. Each
tick's job also has an id of its own (``name@tick``), created only if absent: a second
guard, should the last tick ever be lost (a Redis failover).

Ticks no worker settled in time (every worker was down) are *missed*: the ``missed``
option runs them once, as one job, or skips them; never one job per missed tick.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Any, Literal, Protocol

from runnel.exceptions import TransportError
from runnel.metrics import stats
from runnel.runtime.retry import outage, reraise_if_cancelled
from runnel.settings import zone_of

# croniter is imported where a schedule is read: only an app with cron jobs needs it, and
# importing it (and dateutil) is a noticeable part of a worker's start.

if TYPE_CHECKING:
    from runnel.jobs.clock import Clock
    from runnel.jobs.model import NewJob
    from runnel.store.jobs import JobStore

log = logging.getLogger("runnel.jobs")

Missed = Literal["run_once", "skip"]
MISSED: tuple[Missed, ...] = ("run_once", "skip")

SETTLE_TRIES = 5
"""Settle calls per tick and worker: a refused one means another worker moved the last
tick, and the next call starts from what it moved it to."""
MIN_WAIT = 0.005
"""Shortest sleep of the scheduler loop (a timer may fire a little before a tick)."""


class Scheduled(Protocol):
    """What the scheduler uses of a job function (a :class:`runnel.jobs.JobFunction`)."""

    @property
    def name(self) -> str: ...

    @property
    def periodic(self) -> Cron | None: ...

    @property
    def queue(self) -> str: ...

    def prepare(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> NewJob: ...


@dataclass(frozen=True)
class Cron:
    """A job's schedule: a cron expression in a time zone, and what to do with missed ticks."""

    spec: str
    zone: tzinfo
    missed: Missed

    @classmethod
    def declare(cls, spec: Any, timezone: Any = None, missed: Any = None) -> Cron:
        """The schedule, checked: ``ValueError`` with one clear line if it cannot work."""
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError(f"cron must be a cron expression such as '*/5 * * * *', not {spec!r}")
        from croniter import CroniterError, croniter  # only apps with cron jobs need it

        zone = UTC if timezone is None else zone_of(timezone)
        chosen = "run_once" if missed is None else missed
        if chosen not in MISSED:
            raise ValueError(f"missed must be 'run_once' or 'skip', not {missed!r}")

        try:
            croniter(spec, datetime.now(zone))
        except (CroniterError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"invalid cron expression {spec!r}: {exc}") from None
        cron = cls(spec, zone, chosen)
        if cron.after(datetime.now(UTC).timestamp()) is None:
            raise ValueError(f"cron expression {spec!r} never comes due")
        return cron

    @property
    def zone_name(self) -> str:
        return str(getattr(self.zone, "key", None) or self.zone)

    def _moment(self, t: float) -> datetime:
        return datetime.fromtimestamp(t, self.zone)

    def after(self, t: float) -> float | None:
        """The first tick strictly after ``t`` (seconds since the epoch); None if none."""
        from croniter import CroniterError, croniter

        try:
            return float(croniter(self.spec, self._moment(t)).get_next(datetime).timestamp())
        except (CroniterError, OverflowError, ValueError):
            return None

    def before(self, t: float) -> float | None:
        """The last tick strictly before ``t``; None if none."""
        from croniter import CroniterError, croniter

        try:
            return float(croniter(self.spec, self._moment(t)).get_prev(datetime).timestamp())
        except (CroniterError, OverflowError, ValueError):
            return None

    def latest(self, now: float) -> float | None:
        """The last tick at or before ``now``: the one due now."""
        prev = self.before(now)
        if prev is None:
            return None
        nxt = self.after(prev)
        return nxt if nxt is not None and nxt <= now else prev


def tick_id(name: str, tick: float) -> str:
    """The id of a periodic job's job for one tick: its name and the tick in UTC."""
    return f"{name}@{datetime.fromtimestamp(tick, UTC):%Y-%m-%dT%H:%M:%SZ}"


@dataclass(frozen=True)
class Settlement:
    """What settling a job's ticks up to ``due`` enqueues, and which ticks were missed."""

    runs: list[tuple[float, str]]
    """(tick, how): ``"on_time"``, or ``"caught_up"`` for the one run of missed ticks."""
    missed: tuple[float, float] | None = None
    """The first and the last tick missed, if any."""


def settle(cron: Cron, last: float | None, due: float, now: float, grace: float) -> Settlement:
    """Decide what to enqueue for the ticks after ``last`` up to ``due`` (the last tick at or
    before ``now``).

    The ``due`` tick runs if it is at most ``grace`` seconds old: on time. Every other tick
    after ``last`` was missed (no worker settled it in its time): with ``run_once`` they get
    one run together, as the latest of them; with ``skip``, none. A job never settled before
    (``last`` None) starts with its next tick: nothing was missed, it did not exist.
    """
    if last is None:
        return Settlement([])
    on_time = now - due <= grace
    newest = cron.before(due) if on_time else due
    runs: list[tuple[float, str]] = []
    missed = None
    if newest is not None and newest > last:
        first = cron.after(last)
        missed = (first if first is not None else newest, newest)
        if cron.missed == "run_once":
            runs.append((newest, "caught_up"))
    if on_time:
        runs.append((due, "on_time"))
    return Settlement(runs, missed)


class CronScheduler:
    """One worker's share of the periodic jobs: settles each tick that comes due, racing
    the other workers for it (see the module's docstring)."""

    def __init__(
        self,
        jobs: Iterable[Scheduled],
        store: JobStore,
        clock: Clock,
        *,
        app: str,
        grace: float,
        interval: float,
    ) -> None:
        self.jobs = [j for j in jobs if j.periodic is not None]
        self.store = store
        self.clock = clock
        self.app = app
        self.grace = grace
        self.interval = interval
        self._last: dict[str, float | None] = {}
        """Each job's last settled tick, as this worker last learnt it."""
        self._next: dict[str, float] = {}
        """Each job's first tick after its last check: nothing to do before (croniter
        takes about a millisecond a call, too much for every wake of every job)."""
        self._read = False

    def __repr__(self) -> str:
        return f"<CronScheduler {self.app}: {', '.join(j.name for j in self.jobs)}>"

    async def run(self, stopping: asyncio.Event) -> None:
        """Settle ticks as they come due until ``stopping`` is set."""
        for job in self.jobs:
            assert job.periodic is not None
            log.info(
                "periodic job %s: cron %r in %s (missed ticks: %s)",
                job.name,
                job.periodic.spec,
                job.periodic.zone_name,
                job.periodic.missed,
            )
        while not stopping.is_set():
            reraise_if_cancelled()
            try:
                await self.check()
            except TransportError as exc:
                reraise_if_cancelled(exc)
                outage.failed("settling periodic jobs", exc)
                self._read = False  # read the last ticks again once the store answers
            try:
                async with asyncio.timeout(self._wait()):
                    await stopping.wait()
            except TimeoutError:
                pass

    async def check(self) -> None:
        """Settle every job's due tick that this worker does not know settled."""
        if not self._read:
            self._last = await self.store.last_ticks([j.name for j in self.jobs])
            self._read = True
        now = self.clock.now()
        for job in self.jobs:
            await self._settle(job, now)

    def _wait(self) -> float:
        """Until the next tick of any job, at most the schedule interval (a clock moved by
        hand is looked at again soon)."""
        until = min(self._next.values(), default=math.inf) - self.clock.now()
        return max(MIN_WAIT, min(self.interval, until))

    async def _settle(self, job: Scheduled, now: float) -> None:
        cron = job.periodic
        assert cron is not None
        if now < self._next.get(job.name, -math.inf):
            return
        due = cron.latest(now)
        for _ in range(SETTLE_TRIES):
            last = self._last.get(job.name)
            if due is None or (last is not None and due <= last):
                break
            plan = settle(cron, last, due, now, self.grace)
            new = [_tick_job(job, tick, now) for tick, _ in plan.runs]
            done, stored = await self.store.settle_ticks(job.name, last, due, new)
            self._last[job.name] = stored
            if done:
                self._report(job, last, due, plan)
                break
        else:
            return  # every try refused: other workers are busy settling; look again soon
        after = cron.after(now)
        self._next[job.name] = math.inf if after is None else after

    def _report(self, job: Scheduled, last: float | None, due: float, plan: Settlement) -> None:
        cron = job.periodic
        assert cron is not None
        for _, how in plan.runs:
            stats.ticks[self.app, job.name, job.queue, how] += 1
        if last is None:
            nxt = cron.after(due)
            log.info(
                "periodic job %s starts with its next tick, %s",
                job.name,
                "never" if nxt is None else _when(nxt),
            )
        if plan.missed is None:
            return
        first, newest = plan.missed
        span = _when(first) if first == newest else f"{_when(first)} to {_when(newest)}"
        if cron.missed == "run_once":
            outcome = f"enqueued one run for them, {tick_id(job.name, newest)}"
        else:
            outcome = "skipped them (missed='skip')"
            stats.ticks[self.app, job.name, job.queue, "skipped"] += 1
        log.warning(
            "periodic job %s: ticks missed (no worker settled them in time): %s; %s",
            job.name,
            span,
            outcome,
        )


def _tick_job(job: Scheduled, tick: float, now: float) -> NewJob:
    """The job of one tick: no arguments, the tick's own id, created now."""
    new = job.prepare((), {})
    return dataclasses.replace(new, id=tick_id(job.name, tick), created=now)


def _when(t: float) -> str:
    return f"{datetime.fromtimestamp(t, UTC):%Y-%m-%dT%H:%M:%SZ}"
