"""The fetcher: one read loop feeding the inboxes of every partition an executor owns."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from runnel.processing.retry import Backoff, retrying
from runnel.transport import NEW
from runnel.types import Event

if TYPE_CHECKING:
    from runnel.processing.executor import Executor
    from runnel.processing.inbox import Inbox

log = logging.getLogger("runnel.fetcher")


class Fetcher:
    """Reads every partition whose inbox has room, in one command per round.

    Each partition is read from its pending entries first (what an earlier owner read but
    never acknowledged, in order), then from new entries. A full inbox is left out of the
    next read, so memory stays flat on any backlog and a slow partition never holds the
    others back.

    When everything is drained the read blocks (up to ``read_timeout``) on all partitions.
    When some partitions are busy and the rest have nothing new, a read must not block
    (the busy ones would starve), so the fetcher sleeps until a consumer makes room or the
    watcher, on its own connection, sees a new entry on one of the quiet partitions.
    """

    def __init__(self, executor: Executor, inboxes: dict[str, Inbox], wake: asyncio.Event) -> None:
        self.executor = executor
        self.inboxes = inboxes
        self.wake = wake
        self._watch: dict[str, bytes] = {}
        self._armed = asyncio.Event()
        self._stopping = False

    def stop(self) -> None:
        """Stop after the read in flight (at most ``read_timeout``); nothing read is lost,
        since what is not yet processed stays pending in the group."""
        self._stopping = True
        self.wake.set()
        self._armed.set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            watching = tg.create_task(self._watcher(), name="watcher")
            await self._fetch()
            watching.cancel()  # safe at any point: watching changes no state

    async def _fetch(self) -> None:
        executor = self.executor
        transport = executor.transport
        processor = executor.processor
        inboxes = self.inboxes
        last = await retrying(
            lambda: transport.last_delivered(list(inboxes), executor.group), "reading positions"
        )
        for key, xid in last.items():
            inboxes[key].last_id = xid
        backoff = Backoff()
        while not self._stopping:
            wanted = {key: box.position for key, box in inboxes.items() if box.wants_more}
            if not wanted:
                self.wake.clear()
                if not self._stopping:
                    await self.wake.wait()
                continue
            history = any(pos != NEW for pos in wanted.values())
            idle = (
                not history
                and len(wanted) == len(inboxes)
                and not any(b.items for b in inboxes.values())
            )
            try:
                result = await transport.read(
                    executor.group,
                    executor.consumer_name,
                    wanted,
                    processor.prefetch_count,
                    processor.read_timeout if idle else None,
                )
            except Exception as exc:
                log.warning(
                    "reading %s failed, retrying in %.1fs: %r",
                    processor.stream.name,
                    backoff.delay,
                    exc,
                )
                await backoff.sleep()
                continue
            backoff.reset()
            got = False
            for key, entries in result:
                if entries:
                    got = True
                    await self._deliver(inboxes[key], entries)
            if history:
                # A pending read that came back empty means that history is drained.
                for key, pos in wanted.items():
                    if pos != NEW and not any(k == key and e for k, e in result):
                        inboxes[key].position = NEW
                continue
            if got or idle:
                continue
            if any(box.wants_more for key, box in inboxes.items() if key not in wanted):
                continue  # a consumer made room during the read
            self.wake.clear()
            if self._stopping:
                break
            self._watch = {key: inboxes[key].last_id for key in wanted}
            self._armed.set()
            await self.wake.wait()
            if not self._stopping:
                self._armed.clear()

    async def _watcher(self) -> None:
        """While armed, wait on its own connection for new entries on the quiet partitions."""
        transport = self.executor.transport
        block = self.executor.processor.read_timeout
        while True:
            await self._armed.wait()
            if self._stopping:
                return
            try:
                if await transport.wait_for_new(self._watch, block):
                    self.wake.set()
            except Exception as exc:
                log.debug("watching for new events failed: %r", exc)
                await asyncio.sleep(0.5)

    async def _deliver(self, box: Inbox, entries: list) -> None:
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
        else:
            box.last_id = entries[-1][0]
        if trimmed:
            # The stream was trimmed (partition_size) past entries nobody processed.
            log.error(
                "%d unprocessed events of %r were trimmed away before they could be read "
                "(is partition_size too small for the backlog?)",
                len(trimmed),
                partition,
            )
            await self.executor.transport.ack(self.executor.group, {partition.key: trimmed})
        box.put(events)
