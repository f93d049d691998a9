"""Coalesced acknowledgements for one partition.

An event is recorded here only once its loop iteration has finished; the ids are sent in
one command when the consumer is about to wait for more events, when enough have piled
up, and before the partition is given up. A failed send keeps the ids for the next try:
the worst case is a redelivery, never a loss.
"""

from __future__ import annotations

import logging

from runnel.transport import Transport

log = logging.getLogger("runnel.acks")


class Acks:
    def __init__(self, transport: Transport, group: str, key: str, batch: int) -> None:
        self.transport = transport
        self.group = group
        self.key = key
        self.batch = batch
        self.ids: list[bytes] = []

    def add(self, xid: bytes) -> bool:
        """Record a finished event; True when it is time to flush."""
        self.ids.append(xid)
        return len(self.ids) >= self.batch

    async def flush(self) -> bool:
        if not self.ids:
            return True
        ids, self.ids = self.ids, []
        try:
            await self.transport.ack(self.group, {self.key: ids})
        except Exception as exc:
            self.ids = ids + self.ids
            log.warning(
                "acknowledgement of %d events on %s failed, will retry: %r", len(ids), self.key, exc
            )
            return False
        return True
