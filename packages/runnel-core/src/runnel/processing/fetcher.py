"""The fetcher: one read loop feeding the inboxes of every partition an executor owns."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from runnel.transport import NEW
from runnel.types import Event

if TYPE_CHECKING:
    from runnel.processing.executor import Executor
    from runnel.processing.inbox import Inbox

log = logging.getLogger("runnel.fetcher")

MAX_BACKOFF = 5.0


class Fetcher:
    """Reads from every partition whose inbox has room, in one command per round.

    Each partition is read from its pending entries first (what an earlier owner read but
    never acknowledged, in order) and then from new entries, blocking up to
    ``read_timeout`` when nothing is waiting. A full inbox is left out of the next read, so
    a slow partition never makes memory grow and never holds the others back.
    """

    def __init__(self, executor: Executor, inboxes: dict[str, Inbox], space: asyncio.Event) -> None:
        self.executor = executor
        self.inboxes = inboxes
        self.space = space

    async def run(self) -> None:
        executor = self.executor
        processor = executor.processor
        backoff = 0.1
        while True:
            positions = {key: box.position for key, box in self.inboxes.items() if box.wants_more}
            if not positions:
                self.space.clear()
                await self.space.wait()
                continue
            history = any(pos != NEW for pos in positions.values())
            try:
                result = await executor.transport.read(
                    executor.group,
                    executor.consumer_name,
                    positions,
                    processor.prefetch_count,
                    None if history else processor.read_timeout,
                )
            except Exception as exc:
                log.warning("reading %s failed, retrying in %.1fs: %r", processor.stream.name, backoff, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            backoff = 0.1
            for key, entries in result:
                box = self.inboxes.get(key)
                if box is not None:
                    await self._deliver(box, entries)
            if history:
                # A pending read that came back empty means the history is drained.
                returned = {key for key, entries in result if entries}
                for key, pos in positions.items():
                    if pos != NEW and key not in returned:
                        self.inboxes[key].position = NEW

    async def _deliver(self, box: Inbox, entries: list) -> None:
        if not entries:
            return
        trimmed = []
        events = []
        partition = box.partition
        for xid, fields in entries:
            if fields is None:
                trimmed.append(xid)
            else:
                events.append(Event(partition, xid, fields))
        if box.position != NEW:
            box.position = entries[-1][0]
        if trimmed:
            # The stream was trimmed (partition_size) past entries nobody processed.
            log.error(
                "%d unprocessed events of %r were trimmed away before they could be read "
                "(partition_size too small for the backlog?)", len(trimmed), partition,
            )
            await self.executor.transport.ack(self.executor.group, {box.partition.key: trimmed})
        box.put(events)
