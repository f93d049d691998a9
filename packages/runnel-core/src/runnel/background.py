"""Background tasks: ``@app.task``, ``@app.timer`` and ``@app.crontab``.

(Not to be confused with the job queue, :mod:`runnel.jobs`: these run on a schedule in
every worker, or on the leader, rather than once per enqueued call.)
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from runnel.runtime.retry import reraise_if_cancelled

log = logging.getLogger("runnel.background")


@dataclass(eq=False)
class BackgroundTask:
    """A function the worker runs besides processors, at start-up or on a schedule."""

    func: Callable[[], Any]
    kind: str  # "task", "timer" or "crontab"
    on_leader: bool = False
    interval: float | None = None
    spec: str | None = None
    timezone: tzinfo | None = None

    @property
    def name(self) -> str:
        return getattr(self.func, "__qualname__", repr(self.func))

    async def call(self) -> None:
        """Run the function once: awaited if async, in a thread if not (never blocks the loop)."""
        if inspect.iscoroutinefunction(self.func):
            await self.func()
        else:
            await asyncio.to_thread(self.func)

    async def run(self, stopping: asyncio.Event) -> None:
        """Run on this job's schedule until ``stopping`` is set."""
        if self.kind == "task":
            await self._guarded()
            return
        while not stopping.is_set():
            reraise_if_cancelled()
            delay = self.next_delay(datetime.now(tz=self.timezone))
            try:
                async with asyncio.timeout(delay):
                    await stopping.wait()
                return
            except TimeoutError:
                pass
            await self._guarded()

    def next_delay(self, now: datetime) -> float:
        if self.kind == "timer":
            assert self.interval is not None
            return self.interval
        assert self.spec is not None
        from croniter import croniter  # only apps with crontab tasks need it

        nxt = croniter(self.spec, now).get_next(datetime)
        # Subtract in UTC: two datetimes sharing a ZoneInfo subtract in wall-clock time,
        # which is off by an hour across a daylight-saving change.
        return max(0.0, (nxt.astimezone(UTC) - now.astimezone(UTC)).total_seconds())

    async def _guarded(self) -> None:
        try:
            await self.call()
        except asyncio.CancelledError:
            raise
        except Exception:  # user code: a background task's failure is logged, it runs again
            reraise_if_cancelled()
            log.exception("%s %s raised", self.kind, self.name)


def validate_crontab(spec: str) -> None:
    from croniter import croniter

    if not croniter.is_valid(spec):
        raise ValueError(f"invalid crontab spec {spec!r}")
