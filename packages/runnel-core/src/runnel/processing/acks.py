"""Coalesced, fenced acknowledgements for one partition.

An event is recorded here only once its loop iteration has finished; the ids are sent in
one command when the consumer is about to wait for more events, when enough have piled
up, and before the partition is given up. The store acknowledges them only if this
executor still holds the partition's lock. A failed send keeps the ids for the next try:
the worst case is a redelivery, never a loss.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runnel.processing.executor import Executor

from runnel.processing.retry import reraise_if_cancelled

log = logging.getLogger("runnel.acks")


class Acks:
    def __init__(self, executor: Executor, key: str, batch: int) -> None:
        self.executor = executor
        self.key = key
        self.batch = batch
        self.ids: list[bytes] = []

    def add(self, xid: bytes) -> bool:
        """Record a finished event; True when it is time to flush."""
        self.ids.append(xid)
        return len(self.ids) >= self.batch

    async def flush(self) -> bool:
        """Send what is recorded; False if it could not be acknowledged (yet, or ever)."""
        if not self.ids:
            return True
        ids, self.ids = self.ids, []
        executor = self.executor
        try:
            lost = await executor.coordination.ack(executor.id, {self.key: ids})
        except Exception as exc:
            reraise_if_cancelled()
            self.ids = ids + self.ids
            log.warning(
                "acknowledging %d events on %s failed, will retry: %r", len(ids), self.key, exc
            )
            return False
        if lost:
            # Someone else owns the partition now; they will process these again.
            log.warning("lost %s before acknowledging %d events", self.key, len(ids))
            executor.lost(self.key)
            return False
        return True
