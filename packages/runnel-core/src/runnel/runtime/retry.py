"""Retrying calls to the store while it is unreachable, with capped exponential backoff.

Only :class:`~runnel.exceptions.TransportError` is retried: stores raise it for their own
failures (runnel-redis translates redis-py's at its seam), so any other exception out of
a store call is a bug and surfaces instead of being retried forever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

from runnel.exceptions import AccessDenied, TransportError

log = logging.getLogger("runnel.retry")

T = TypeVar("T")

BLOCK_CAP_MS = 500
"""Longest a background loop blocks in one command. A cancellation that arrives during a
blocking command can be held back by the Redis client until the command returns, so
this bounds how long stopping can take."""

FIRST_DELAY = 0.1
MAX_DELAY = 5.0


FATAL: tuple[type[Exception], ...] = (AccessDenied,)
"""Failures that no retry can fix: a loop that meets one stops, and so does the worker."""


def reraise_if_cancelled(failure: BaseException | None = None) -> None:
    """Raise a cancellation that a library swallowed or turned into an ordinary error,
    and re-raise ``failure`` if it is fatal (wrong credentials, a missing permission).

    Call it at the top of every long-running loop and first in its ``except
    TransportError`` blocks (passing the exception): a store's client library can drop a
    cancellation (see :func:`cancel_and_wait`; runnel-redis's seam already re-raises one
    dropped during a call, this covers other stores and code between calls), and a loop
    would then never stop; nor should it go on retrying what the store refuses on purpose.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
    if isinstance(failure, FATAL):
        raise failure


RECANCEL_EVERY = 0.2
"""How often a task that was cancelled but is still running is cancelled again."""


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel ``tasks`` and wait until every one has ended.

    One cancellation is not always enough: before Python 3.12, ``asyncio.wait_for`` drops
    a cancellation that arrives just as what it waits for completes, and redis-py sends
    every command through it. Code that polls Redis in a loop (ours or a user's job) then
    carries on as if never cancelled; measured, a loop of EXISTS calls cancelled at a
    random moment kept running 1,364 times in 3,000. runnel-redis's seam raises such a
    cancellation again for Runnel's own calls (measured: 0 in 1,000, against 328 in 1,000
    without it), but a user's job or background task polling through ``App.redis`` still
    meets it. Such a task is cancelled again until it ends; one that keeps refusing is
    named in the log.
    """
    pending = {task for task in tasks if not task.done()}
    rounds = 0
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=RECANCEL_EVERY)
        rounds += 1
        if pending and rounds == 25:
            names = ", ".join(sorted(_name(task) for task in pending))
            log.warning("still cancelling (they ignore cancellation): %s", names)


class Stopped(Exception):
    """A stop was asked for before what :func:`until_stopped` awaited finished."""


async def until_stopped(coro: Coroutine[Any, Any, T], stopping: asyncio.Event) -> T:
    """Await ``coro`` unless ``stopping`` is set first: then end it and raise :class:`Stopped`.

    A stop only sets an event; a start-up step that never looks at it (a retry loop while
    the store is down, a command a black-holed store never answers) would hold the stop
    until the store came back. Every wait on the store before a loop that watches the
    event itself goes through here, so the first signal ends it at once.
    """
    if stopping.is_set():
        coro.close()
        raise Stopped
    task = asyncio.ensure_future(coro)
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait([task, stop], return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        # Cancelled from outside (a second signal): end ``coro`` too, and take its outcome,
        # so that nothing is left running or unretrieved.
        await cancel_and_wait([task])
        _retrieve(task)
        raise
    finally:
        stop.cancel()
    if not task.done():
        await cancel_and_wait([task])
        _retrieve(task)
        raise Stopped
    return task.result()


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark the outcome of a task given up on as seen (asyncio logs one never retrieved)."""
    if not task.cancelled():
        task.exception()


def _name(task: asyncio.Future[Any]) -> str:
    return task.get_name() if isinstance(task, asyncio.Task) else repr(task)


class Outage:
    """Says once where the store is and why a call to it failed, retries quietly (debug
    lines), and says when calls work again: one line per outage, not one per poll."""

    def __init__(self) -> None:
        self.where = "the store"
        self.down = False

    def failed(self, what: str, exc: BaseException) -> None:
        if self.down:
            log.debug("%s failed again: %r", what, exc)
            return
        self.down = True
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())
        log.warning("%s: %s failed (%s); retrying quietly until it works", self.where, what, reason)

    def recovered(self) -> None:
        if self.down:
            self.down = False
            log.warning("reconnected to %s", self.where)


outage = Outage()
"""The process's one outage reporter; the worker sets ``where`` to its redacted URL."""


class Backoff:
    """Delays of 0.1 s doubling up to 5 s; reset after a success."""

    def __init__(self) -> None:
        self.delay = FIRST_DELAY

    async def sleep(self) -> None:
        await asyncio.sleep(self.delay)
        self.delay = min(self.delay * 2, MAX_DELAY)

    def reset(self) -> None:
        self.delay = FIRST_DELAY
        if outage.down:
            outage.recovered()


async def retrying(
    call: Callable[[], Awaitable[T]], what: str, fatal: tuple[type[Exception], ...] = ()
) -> T:
    """Await ``call()`` until it succeeds, retrying on :class:`TransportError` and logging
    each failure (cancellation stops it).

    Exceptions of the ``fatal`` types are not worth retrying and propagate, as do
    :data:`FATAL` ones and every exception that is not a transport error.
    """
    backoff = Backoff()
    while True:
        reraise_if_cancelled()
        try:
            result = await call()
        except fatal:
            raise
        except TransportError as exc:
            reraise_if_cancelled(exc)
            outage.failed(what, exc)
            await backoff.sleep()
            continue
        backoff.reset()
        return result
