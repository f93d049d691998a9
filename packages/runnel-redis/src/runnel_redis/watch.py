"""Blocking looks for new entries on a Redis Cluster, where one ``XREAD BLOCK`` cannot
name streams of several slots: one blocking read per partition instead, all at once.

A read whose caller gave up is not cancelled: redis-py drops a connection whose reply
was cancelled, and reconnecting on every wake would cost more than the wait saves. It is
left to end by itself (within its ``BLOCK``) and shared meanwhile with any caller that
watches the same partition from the same id, which is what a fetcher's next wait does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

Look = tuple[str, bytes]
"""A stream key and the id after which an entry is news."""


class Watch:
    """The blocking reads in flight, owned here (:meth:`aclose` ends them)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._reads: dict[Look, asyncio.Task[bool]] = {}

    async def wait(self, after: Mapping[str, bytes], block_ms: int) -> bool:
        """Whether a stream got an entry after its id within ``block_ms``; a read's
        error is raised (the others carry on)."""
        if not after:  # nothing to watch: wait out the time, as a blocking read would
            await asyncio.sleep(block_ms / 1000)
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + block_ms / 1000
        waiting = {self._read(look, block_ms): look for look in after.items()}
        while waiting:
            left = deadline - loop.time()
            if left <= 0:
                return False
            done, _ = await asyncio.wait(waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                look = waiting.pop(task)
                if task.cancelled():
                    continue  # closed meanwhile
                if task.result():
                    return True
                # Nothing yet: a read another caller started earlier ended before our
                # time is up. Look again for what is left of it.
                left_ms = int((deadline - loop.time()) * 1000)
                if left_ms > 0:
                    waiting[self._read(look, left_ms)] = look
        return False

    def _read(self, look: Look, block_ms: int) -> asyncio.Task[bool]:
        task = self._reads.get(look)
        if task is None:
            task = asyncio.create_task(self._xread(*look, block_ms), name=f"watch {look[0]}")
            self._reads[look] = task
            task.add_done_callback(lambda done: self._ended(look, done))
        return task

    def _ended(self, look: Look, task: asyncio.Task[bool]) -> None:
        if self._reads.get(look) is task:
            del self._reads[look]
        if not task.cancelled():
            task.exception()  # seen: the callers waiting on it raise it

    async def _xread(self, key: str, after: bytes, block_ms: int) -> bool:
        # Sent to the key's master by name: left to route XREAD itself, redis-py first
        # asks a node where its keys are (COMMAND GETKEYS), a round trip more per read.
        await self.client.initialize()  # the slot map, if it is new or was found stale
        reply = await self.client.execute_command(
            "XREAD",
            "COUNT",
            1,
            "BLOCK",
            max(1, block_ms),  # 0 would block for ever
            "STREAMS",
            key,
            after,
            target_nodes=self.client.get_node_from_key(key),
        )
        return bool(reply)

    async def aclose(self) -> None:
        reads = list(self._reads.values())
        for task in reads:
            task.cancel()
        await asyncio.gather(*reads, return_exceptions=True)
        await self.client.aclose()
