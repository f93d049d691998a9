"""Retrying calls to the transport while it is unreachable, with capped exponential backoff."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

log = logging.getLogger("runnel.retry")

T = TypeVar("T")

FIRST_DELAY = 0.1
MAX_DELAY = 5.0


class Backoff:
    """Delays of 0.1 s doubling up to 5 s; reset after a success."""

    def __init__(self) -> None:
        self.delay = FIRST_DELAY

    async def sleep(self) -> None:
        await asyncio.sleep(self.delay)
        self.delay = min(self.delay * 2, MAX_DELAY)

    def reset(self) -> None:
        self.delay = FIRST_DELAY


async def retrying(call: Callable[[], Awaitable[T]], what: str) -> T:
    """Await ``call()`` until it succeeds, logging each failure (cancellation stops it)."""
    backoff = Backoff()
    while True:
        try:
            return await call()
        except Exception as exc:
            log.warning("%s failed, retrying in %.1fs: %r", what, backoff.delay, exc)
            await backoff.sleep()
