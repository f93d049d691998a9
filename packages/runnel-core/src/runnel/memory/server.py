"""One in-process store, shared by name: every transport of ``memory://NAME`` in this
process sees the same :class:`MemoryServer`.

Transports live in many event loops (each worker's, the ``delay_sync`` portal's), so
state is guarded by a threading lock, and a waiter is woken on its own loop with
``call_soon_threadsafe``. Blocking reads wait for a notification, never poll.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from runnel.memory.identities import Remembered
from runnel.memory.logs import Id, PartitionLog
from runnel.store.log import PartitionId
from runnel.store.state import Deadlines, Writes

T = TypeVar("T")
log = logging.getLogger("runnel.memory")

Clock = Callable[[], float]
"""Seconds, never going back: what locks, heartbeats and leadership expire by."""


class MemoryServer:
    """The state of one named store, and the means to wait for changes to it."""

    def __init__(self, name: str = "", clock: Clock = time.monotonic) -> None:
        self.name = name
        self.clock = clock
        self.lock = threading.Lock()
        self.logs: dict[Hashable, PartitionLog] = {}
        self.values: dict[Hashable, Any] = {}
        """Plain values: membership, schemas, quarantines (key -> value)."""
        self.expiring: dict[Hashable, tuple[str, float]] = {}
        """Locks, heartbeats, leaders: key -> (holder, expiry on :attr:`clock`)."""
        self._waiters: dict[
            Hashable, set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]
        ] = {}
        self._jobs: dict[str, Any] = {}  # app -> runnel.memory.jobs.JobQueueState
        self.tables: dict[tuple[str, PartitionId], dict[bytes, bytes]] = {}
        """Committed table state: (table, source partition) -> key -> value."""
        self.deadlines: dict[tuple[str, PartitionId], dict[bytes, float]] = {}
        """Committed deadlines of table keys: (table, source partition) -> key -> when."""
        self.remembered: dict[Hashable, Remembered] = {}
        """What each partition remembers of appends with identities."""

    def __repr__(self) -> str:
        return f"<MemoryServer {self.name!r}>"

    # Expiring values (call with the lock held).

    def holder(self, key: Hashable) -> str | None:
        """Who holds ``key`` now (None if nobody, or if it expired)."""
        found = self.expiring.get(key)
        if found is None:
            return None
        if found[1] <= self.clock():
            del self.expiring[key]
            return None
        return found[0]

    def hold(self, key: Hashable, holder: str, ttl_ms: int) -> None:
        self.expiring[key] = (holder, self.clock() + ttl_ms / 1000)

    # Logs (call with the lock held).

    def log(self, key: Hashable) -> PartitionLog:
        found = self.logs.get(key)
        if found is None:
            found = self.logs[key] = PartitionLog()
        return found

    def identities(self, key: Hashable) -> Remembered:
        """A partition's identity state (call with the lock held)."""
        found = self.remembered.get(key)
        if found is None:
            found = self.remembered[key] = Remembered()
        return found

    def table(self, name: str, partition: PartitionId) -> dict[bytes, bytes]:
        """One partition of a table (call with the lock held)."""
        found = self.tables.get((name, partition))
        if found is None:
            found = self.tables[(name, partition)] = {}
        return found

    def write(self, partition: PartitionId, writes: Writes, deadlines: Deadlines) -> None:
        """Apply a commit's table writes and deadlines (call with the lock held)."""
        for name, values in writes.items():
            table = self.table(name, partition)
            for key, value in values.items():
                if value is None:
                    table.pop(key, None)
                else:
                    table[key] = bytes(value)
        for name, whens in deadlines.items():
            held = self.deadlines.setdefault((name, partition), {})
            for key, when in whens.items():
                if when is None:
                    held.pop(key, None)
                else:
                    held[bytes(key)] = float(when)

    # Waiting and waking.

    def notify(self, topics: Iterable[Hashable]) -> None:
        """Wake whoever waits on any of ``topics`` (call with the lock held)."""
        for topic in topics:
            for loop, future in self._waiters.pop(topic, ()):
                try:
                    loop.call_soon_threadsafe(_wake, future)
                except RuntimeError:  # that loop is closed: nobody is waiting any more
                    pass

    async def wait_for(
        self, topics: Iterable[Hashable], ready: Callable[[], T | None], timeout_ms: int
    ) -> T | None:
        """``ready()`` (run under the lock) once it gives something, waiting up to
        ``timeout_ms`` for a notification on ``topics`` between tries; None if time ran out."""
        loop = asyncio.get_running_loop()
        # Let other tasks run first, as a round trip to a server would: a caller that
        # loops on an immediate answer (the fetcher's watcher) must not starve the loop.
        await asyncio.sleep(0)
        topics = list(topics)
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        while True:
            with self.lock:
                result = ready()
                if result is not None:
                    return result
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return None
                future: asyncio.Future[None] = loop.create_future()
                entry = (loop, future)
                for topic in topics:
                    self._waiters.setdefault(topic, set()).add(entry)
            try:
                async with asyncio.timeout(remaining):
                    await future
            except TimeoutError:
                pass
            finally:
                with self.lock:
                    for topic in topics:
                        waiting = self._waiters.get(topic)
                        if waiting is not None:
                            waiting.discard(entry)
                            if not waiting:
                                del self._waiters[topic]

    # Job queues: kept here so that every transport of this store shares them.

    def job_state(self, app: str) -> Any:
        """The app's ``runnel.memory.jobs.JobQueueState`` (imported when first needed:
        streams work without the job store's module)."""
        with self.lock:
            found = self._jobs.get(app)
            if found is None:
                jobs = importlib.import_module("runnel.memory.jobs")
                found = self._jobs[app] = jobs.JobQueueState()
            return found


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_servers: dict[str, MemoryServer] = {}
_servers_lock = threading.Lock()


def server(name: str = "") -> MemoryServer:
    """The process's store called ``name`` (made on first use)."""
    with _servers_lock:
        found = _servers.get(name)
        if found is None:
            found = _servers[name] = MemoryServer(name)
            log.info(
                "memory://%s is a store inside this process: other processes, the runnel "
                "CLI included, cannot see it",
                name,
            )
        return found


def forget(name: str) -> None:
    """Drop the store called ``name`` (its data goes; the next use starts empty)."""
    with _servers_lock:
        _servers.pop(name, None)


__all__ = ["Clock", "Id", "MemoryServer", "forget", "server"]
