"""What a running job can learn and say of itself: ``current_job()`` (id, name, which try,
whether it was cancelled) and ``report_progress()`` (how far it got).

```python
@app.job
async def resize(image_id: int) -> str:
    await report_progress(0.5, "resizing")        # kept with the job: result.progress()
    ...

@app.job
def export(rows: int) -> int:
    for n in range(rows):
        if current_job().cancelled:                # a plain def job checks; async def ones
            return n                               # get CancelledError instead
        report_progress_sync(n / rows, f"row {n}")
```
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

MESSAGE_LIMIT = 200
"""Longest progress message kept (characters); a longer one is cut, ending in "...". """
SYNC_REPORT_LIMIT = 30.0
"""Longest ``report_progress_sync()`` waits for the store (s); past it the report is dropped
(a worker stopping while the job's thread runs on)."""


class JobSignals:
    """What a running job shares with the executor running it: the cancel flag, and
    where its progress reports go (the executor's event loop, which owns the store)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        report: Callable[[float, str], Coroutine[Any, Any, None]],
    ) -> None:
        self.loop = loop
        self.report = report
        self.cancelled = threading.Event()
        """Set once the job is cancelled (read from the job's own thread, for def jobs)."""


@dataclass(frozen=True, slots=True)
class JobContext:
    id: str
    name: str
    tries: int
    """Tries started so far, this one included (1 on the first run)."""
    retries: int
    """Retries allowed after the first try."""
    signals: JobSignals | None = field(default=None, repr=False, compare=False)

    @property
    def last_try(self) -> bool:
        """Whether a failure now makes the job DEAD rather than retried."""
        return self.tries > self.retries

    @property
    def cancelled(self) -> bool:
        """Whether the job was cancelled (its status is CANCELLED and whatever it returns
        now is dropped). A plain ``def`` job checks it and returns early; an ``async def``
        job is interrupted with ``CancelledError`` and rarely needs it."""
        return self.signals is not None and self.signals.cancelled.is_set()


_current: ContextVar[JobContext | None] = ContextVar("runnel_current_job", default=None)


def current_job() -> JobContext | None:
    """The job being run by this task or thread, or None outside a job."""
    return _current.get()


async def report_progress(fraction: float, message: str = "") -> None:
    """Say how far the running job got: ``fraction`` from 0.0 to 1.0 and a short message.

    Stored with the job when this returns (``result.progress()``, ``runnel jobs show``,
    the dashboard); each call is one write, so report every few percent, not every item.
    Does nothing outside a job (the function called inline), or once the job was
    cancelled or taken back from this worker. A store that cannot be reached is logged,
    not raised: progress never fails a job.
    """
    job, text = _checked(fraction, message)
    if job is None or job.signals is None:
        return
    signals = job.signals
    report = signals.report(float(fraction), text)
    if asyncio.get_running_loop() is signals.loop:
        await report
    else:  # a def job that runs a loop of its own
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(report, signals.loop))


def report_progress_sync(fraction: float, message: str = "") -> None:
    """:func:`report_progress` for a plain ``def`` job (in its worker thread): blocks
    until stored."""
    job, text = _checked(fraction, message)
    if job is None or job.signals is None:
        return
    signals = job.signals
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is signals.loop:
        raise RuntimeError(
            "report_progress_sync() blocks: call it from a plain def job; an async def job "
            "awaits report_progress()"
        )
    if not signals.loop.is_running():
        return  # the worker stopped while this thread ran on: nobody to keep it
    report = signals.report(float(fraction), text)
    stored = asyncio.run_coroutine_threadsafe(report, signals.loop)
    try:
        stored.result(timeout=SYNC_REPORT_LIMIT)
    except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
        stored.cancel()  # the worker is stopping: the report is dropped


def _checked(fraction: float, message: str) -> tuple[JobContext | None, str]:
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise TypeError(f"progress must be a number from 0 to 1, not {fraction!r}")
    if not (math.isfinite(fraction) and 0 <= fraction <= 1):
        raise ValueError(f"progress must be a number from 0 to 1, not {fraction!r}")
    if not isinstance(message, str):
        raise TypeError(f"the progress message must be a string, not {message!r}")
    text = " ".join(message.split())
    if len(text) > MESSAGE_LIMIT:
        text = text[: MESSAGE_LIMIT - 3] + "..."
    return _current.get(), text
