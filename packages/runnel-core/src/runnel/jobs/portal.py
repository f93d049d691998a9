"""Calling the async job API from synchronous code (a Flask or Django view, a script).

A :class:`Portal` is an event loop in a daemon thread of its own; synchronous calls hand
it a coroutine and wait for the answer. The loop keeps its own connections (the app
makes a transport per event loop), so it works from any thread, and from a thread whose
own loop is running (which then waits, as any blocking call makes it).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Portal:
    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=f"runnel-portal-{self.name}", daemon=True
                )
                thread.start()
                self._loop = loop
            return self._loop

    def call(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Call ``make()`` in the portal's loop, await what it returns there, and return
        the result (or raise the error) here."""
        loop = self._running_loop()
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RuntimeError("a synchronous job call made from inside the portal's own loop")
        return asyncio.run_coroutine_threadsafe(_inside(make), loop).result()


async def _inside(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Make the coroutine in the portal's loop, not the caller's thread: whatever it looks
    up when made (the app's store, which belongs to a loop) must be the portal's."""
    return await make()
