"""The fetcher: one read loop feeding the inboxes of every partition an executor owns."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from runnel.processing.retry import BLOCK_CAP_MS, Backoff, reraise_if_cancelled, retrying
from runnel.transport import NEW, PENDING_START
from runnel.types import Event

if TYPE_CHECKING:
    from runnel.processing.executor import Executor
    from runnel.processing.inbox import Inbox

log = logging.getLogger("runnel.fetcher")


class Fetcher:
    """Reads every owned partition whose inbox has room, in one round trip per round.

    Reads are fenced: the store reads a partition only if this executor still holds its
    lock, and reports the ones it lost. Each partition is read from its pending entries
    first (what an earlier owner read but never acknowledged, in order), then from new
    entries. A full inbox is left out of the next read, so memory stays flat on any
    backlog and a slow partition never holds the others back.

    Reads never block. When nothing new came back, the fetcher sleeps until a consumer
    makes room or the watcher, blocked on its own connection on the partitions that were
    empty, sees a new entry there.
    """

    def __init__(self, executor: Executor, inboxes: dict[str, Inbox], wake: asyncio.Event) -> None:
        self.executor = executor
        self.inboxes = inboxes
        self.wake = wake
        self._watch: dict[str, bytes] = {}
        self._armed = asyncio.Event()
        self._stopping = False

    def stop(self) -> None:
        """Stop after the read in flight; nothing read is lost, since what is not yet
        processed stays pending in the group."""
        self._stopping = True
        self.wake.set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            watching = tg.create_task(self._watcher(), name="watcher")
            await self._fetch()
            watching.cancel()  # safe at any point: watching changes no state

    async def _fetch(self) -> None:
        executor = self.executor
        processor = executor.processor
        inboxes = self.inboxes
        backoff = Backoff()
        while not self._stopping:
            reraise_if_cancelled()
            if any(box.wants_more for box in inboxes.values()):
                wanted = {key: box.position for key, box in inboxes.items() if box.has_room}
            else:
                wanted = {}
            if not wanted:
                self.wake.clear()
                if not self._stopping:
                    await self.wake.wait()
                continue
            try:
                count = max(inboxes[key].capacity for key in wanted)
                result = await executor.coordination.read(
                    executor.id, executor.consumer_name, wanted, count
                )
            except Exception as exc:
                reraise_if_cancelled()
                # The reply may have been lost after the store delivered entries to us:
                # those are pending now, so read the pending entries after what we hold.
                for held in inboxes.values():
                    if held.position == NEW:
                        held.position = held.last_id or PENDING_START
                log.warning(
                    "reading %s failed, retrying in %.1fs: %r",
                    processor.stream.name,
                    backoff.delay,
                    exc,
                )
                await backoff.sleep()
                continue
            backoff.reset()
            for key in result.lost:
                executor.lost(key)
            got = False
            history = False
            for key, entries in result.entries:
                box = inboxes.get(key)
                if box is None:
                    continue  # revoked meanwhile: the entries stay pending for the next owner
                if box.position != NEW:
                    history = True
                    if not entries:
                        box.position = NEW  # the partition's pending entries are drained
                        continue
                if entries:
                    got = True
                    await self._deliver(box, entries)
            if got or history or self._stopping:
                continue
            if any(box.wants_more for key, box in inboxes.items() if key not in wanted):
                continue  # a consumer made room during the read
            self.wake.clear()
            await self._arm({key: box for key, box in inboxes.items() if key in wanted})
            await self.wake.wait()
            self._armed.clear()

    async def _arm(self, boxes: dict[str, Inbox]) -> None:
        """Point the watcher at the partitions that came back empty."""
        unknown = [key for key, box in boxes.items() if box.last_id is None]
        if unknown:
            try:
                known = await self.executor.transport.last_delivered(unknown, self.executor.group)
            except Exception as exc:
                reraise_if_cancelled()
                log.debug("reading group positions failed: %r", exc)
                known = {}
            for key in unknown:
                boxes[key].last_id = known.get(key, b"0-0")
        self._watch = {key: box.last_id or b"0-0" for key, box in boxes.items()}
        self._armed.set()

    async def _watcher(self) -> None:
        """While armed, wait on its own connection for new entries on the quiet partitions."""
        transport = self.executor.transport
        block = min(self.executor.processor.read_timeout, BLOCK_CAP_MS)
        while True:
            reraise_if_cancelled()
            await self._armed.wait()
            try:
                if await transport.wait_for_new(self._watch, block):
                    self.wake.set()
            except Exception as exc:
                reraise_if_cancelled()
                log.debug("watching for new events failed: %r", exc)
                await asyncio.sleep(0.5)

    async def _deliver(self, box: Inbox, entries: list) -> None:
        partition = box.partition
        events = [Event(partition, xid, fields) for xid, fields in entries if fields is not None]
        trimmed = (
            [xid for xid, fields in entries if fields is None] if len(events) < len(entries) else []
        )
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
            await self.executor.coordination.ack(self.executor.id, {partition.key: trimmed})
        if events and partition.stream.has_schemas:
            # A producer may have started writing with a schema stored after we started.
            await retrying(lambda: partition.stream.admit(events), "loading new schemas")
        box.put(events)
