"""runnel 0.1's way of starting a worker from Python: ``Worker(app).start()``.

A thin adapter over :meth:`runnel.App.run_worker`, which new code awaits directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol


class _Runs(Protocol):
    """What of an App this adapter uses."""

    async def run_worker(self, processors: list[str] | None, *, halt_raises: bool) -> int: ...

    async def aclose(self) -> None: ...


class Worker:
    """Runs an app's processors, job queue and background tasks in this process."""

    def __init__(self, app: _Runs) -> None:
        self.app = app

    def start(self, processors: str | Sequence[str] = "all") -> int:
        """Run until stopped by SIGINT/SIGTERM; return the exit code (0).

        As 0.1 documented for ``ExceptionPolicy.HALT``, a processor's exception
        propagates: the worker stops gracefully (what other partitions have in flight is
        finished and acknowledged; the failed event is not) and then raises it here.
        ``processors`` is ``"all"`` or a list of processor names, as in 0.1. Blocks: it
        runs its own event loop, so call it from synchronous code.
        """
        chosen = None if processors == "all" else list(processors)
        return asyncio.run(self._start(chosen))

    async def _start(self, processors: list[str] | None) -> int:
        try:
            return await self.app.run_worker(processors, halt_raises=True)
        finally:
            await self.app.aclose()


__all__ = ["Worker"]
