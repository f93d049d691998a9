"""Retrying calls to the transport while it is unreachable, with capped exponential backoff."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

log = logging.getLogger("runnel.retry")

T = TypeVar("T")

BLOCK_CAP_MS = 500
"""Longest a background loop blocks in one command. A cancellation that arrives during a
blocking command can be held back by the Redis client until the command returns, so
this bounds how long stopping can take."""

FIRST_DELAY = 0.1
MAX_DELAY = 5.0


def reraise_if_cancelled() -> None:
    """Raise a cancellation that a library swallowed or turned into an ordinary error.

    Call it at the top of every long-running loop and first in its ``except Exception``
    blocks: redis-py can retry a command interrupted by a cancellation, or report it as
    a connection error, and a loop would then never stop.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class Backoff:
    """Delays of 0.1 s doubling up to 5 s; reset after a success."""

    def __init__(self) -> None:
        self.delay = FIRST_DELAY

    async def sleep(self) -> None:
        await asyncio.sleep(self.delay)
        self.delay = min(self.delay * 2, MAX_DELAY)

    def reset(self) -> None:
        self.delay = FIRST_DELAY


async def retrying(
    call: Callable[[], Awaitable[T]], what: str, fatal: tuple[type[Exception], ...] = ()
) -> T:
    """Await ``call()`` until it succeeds, logging each failure (cancellation stops it).

    Exceptions of the ``fatal`` types are not worth retrying and propagate.
    """
    backoff = Backoff()
    while True:
        reraise_if_cancelled()
        try:
            return await call()
        except fatal:
            raise
        except Exception as exc:
            reraise_if_cancelled()
            log.warning("%s failed, retrying in %.1fs: %r", what, backoff.delay, exc)
            await backoff.sleep()
