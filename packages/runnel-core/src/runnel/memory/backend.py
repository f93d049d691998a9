"""The ``memory://NAME`` store: streams, groups, coordination and the job queue in this
process.

For tests and single-process apps: several Apps and workers in one process share a
store by naming it alike, and it behaves as the Redis store does (partitions, consumer
groups, pending entries, fenced reads, expiring locks). Another process, the ``runnel``
CLI included, sees a store of its own, so :attr:`shared` is False.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from runnel.memory.coordination import MemoryCoordination, MemoryLeadership
from runnel.memory.jobs import MemoryJobStore
from runnel.memory.log import MemoryLog
from runnel.memory.schemas import MemorySchemaStore
from runnel.memory.server import MemoryServer, server
from runnel.memory.tables import MemoryTableStore
from runnel.store.backend import Backend


class MemoryBackend(Backend):
    shared = False
    log: MemoryLog

    def __init__(self, store: MemoryServer) -> None:
        self.server = store
        self.log = MemoryLog(store)

    @classmethod
    def from_url(cls, url: str) -> MemoryBackend:
        """``memory://NAME`` (or ``memory://``): the process's store called NAME."""
        parts = urlsplit(url)
        name = parts.netloc + parts.path.rstrip("/")
        return cls(server(name))

    def __repr__(self) -> str:
        return f"<MemoryBackend memory://{self.server.name}>"

    def coordination(self, app: str, stream: str, processor: str) -> MemoryCoordination:
        return MemoryCoordination(self.server, app, stream, processor, group=processor)

    def leadership(self, app: str) -> MemoryLeadership:
        return MemoryLeadership(self.server, app)

    def job_store(self, app: str) -> MemoryJobStore:
        return MemoryJobStore(self.server.job_state(app))

    def schema_store(self, app: str, stream: str) -> MemorySchemaStore:
        return MemorySchemaStore(self.server, app, stream)

    def table_store(self, app: str) -> MemoryTableStore:
        return MemoryTableStore(self.server, app)

    def admin(self) -> MemoryLog:
        return self.log

    async def aclose(self) -> None:
        """Nothing to release: the data stays for the process's other users."""
