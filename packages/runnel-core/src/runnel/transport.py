"""The small interface between the core and the log store that holds the streams.

The core never names a Redis command or key: it asks a :class:`Transport` for the key of
a partition and hands that key back to append, read and acknowledge. Transports are
provided by plugins (``runnel_transports`` hook) and chosen by the URL's scheme, so the
same application runs on any transport unchanged.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from runnel.exceptions import Misconfigured
from runnel.urls import redact

if TYPE_CHECKING:
    from runnel.coordination import Coordination, Leadership
    from runnel.jobs.store import JobStore
    from runnel.schemas import SchemaStore
    from runnel.settings import Settings
    from runnel.synclog import SyncLog

Fields = Mapping[bytes, Any]
"""An entry's field/value pairs as given to :meth:`Transport.append`."""
Entry = tuple[bytes, dict[bytes, bytes] | None]
"""An entry read back: its id and fields (``None`` if it was trimmed before it was read)."""

NEW = b">"
"""The read position meaning "entries never delivered to this group"."""
PENDING_START = b"0-0"
"""The read position meaning "from the start of what this consumer has not acknowledged"."""


class Transport(abc.ABC):
    """A store of partitioned append-only logs with consumer groups."""

    @abc.abstractmethod
    def partition_key(self, app: str, stream: str, number: int) -> str:
        """The store's name for partition ``number`` of ``stream``."""

    @abc.abstractmethod
    async def append(
        self, entries: Sequence[tuple[str, Fields]], maxlen: int | None = None
    ) -> list[bytes]:
        """Append ``(partition_key, fields)`` entries in one round trip, all or none;
        return their ids."""

    @abc.abstractmethod
    async def ensure_group(self, keys: Sequence[str], group: str) -> None:
        """Create consumer group ``group`` on every key (and the key itself) if missing."""

    @abc.abstractmethod
    async def adopt_pending(self, key: str, group: str, consumer: str) -> int:
        """Move entries pending for other consumers of ``group`` on ``key`` to ``consumer``.

        Called when an executor starts, so that what consumers of other names (runnel 0.1
        used one per worker) read but never acknowledged is delivered again, first and in
        order. Runnel itself reads as one consumer name, so this is a one-time migration.
        """

    @abc.abstractmethod
    async def read(
        self,
        group: str,
        consumer: str,
        positions: Mapping[str, bytes],
        count: int,
        block_ms: int | None,
    ) -> list[tuple[str, list[Entry]]]:
        """Read up to ``count`` entries per key after each position.

        A position of :data:`NEW` reads entries never delivered to the group (blocking up
        to ``block_ms`` if there are none); any other id re-reads the consumer's own
        unacknowledged entries after it, without blocking.
        """

    @abc.abstractmethod
    async def last_delivered(self, keys: Sequence[str], group: str) -> dict[str, bytes]:
        """The id of the newest entry delivered to ``group`` on each key."""

    @abc.abstractmethod
    async def wait_for_new(self, after: Mapping[str, bytes], block_ms: int) -> bool:
        """Block until some key has an entry newer than its id in ``after`` (or time is up).

        Changes no state, so it can be abandoned at any time; True if something arrived.
        """

    @abc.abstractmethod
    async def ack(self, group: str, ids: Mapping[str, Sequence[bytes]]) -> None:
        """Acknowledge entries, by key, in one round trip."""

    @abc.abstractmethod
    async def reset_group(self, keys: Sequence[str], group: str, start: str) -> None:
        """Point the group at ``start`` on every key, forgetting pending entries."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release connections."""

    async def backlog(self, keys: Sequence[str], group: str) -> dict[str, tuple[int | None, int]]:
        """For each key: (entries not yet delivered to the group, entries delivered but not
        acknowledged). The first is None where the store cannot tell."""
        raise Misconfigured(f"{type(self).__name__} cannot report backlogs")

    async def first_pending(self, key: str, group: str) -> bytes | None:
        """The oldest entry delivered to ``group`` on ``key`` and not acknowledged."""
        raise Misconfigured(f"{type(self).__name__} cannot list pending entries")

    async def scan(
        self, key: str, after: bytes, count: int
    ) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """Up to ``count`` entries of ``key`` with ids after ``after`` (``b"0-0"``: all),
        oldest first; a page of what is stored, for the CLI."""
        raise Misconfigured(f"{type(self).__name__} cannot list entries")

    async def remove(self, key: str, ids: Sequence[bytes]) -> int:
        """Delete these entries of ``key``; return how many were there."""
        raise Misconfigured(f"{type(self).__name__} cannot delete entries")

    async def lengths(self, keys: Sequence[str]) -> dict[str, int]:
        """For each key: how many entries it holds now (appended, less any trimmed), so
        that a monitor can tell how many arrived between two looks."""
        raise Misconfigured(f"{type(self).__name__} cannot report stream lengths")

    def client(self) -> Any:
        """The store's own client library, for an app's own commands (``App.redis``);
        only stores that have one (Redis) provide it."""
        raise Misconfigured(f"{type(self).__name__} has no client for an app's own commands")

    def coordination(self, app: str, stream: str, processor: str) -> Coordination:
        """The shared state of one processor's executors (membership, locks, ...)."""
        raise Misconfigured(f"{type(self).__name__} does not support several workers")

    def leadership(self, app: str) -> Leadership:
        """The app's leader election."""
        raise Misconfigured(f"{type(self).__name__} does not support leader election")

    def job_store(self, app: str) -> JobStore:
        """The app's job queue (queue, schedule, dead letters, results, executors)."""
        raise Misconfigured(f"{type(self).__name__} cannot hold a job queue")

    def schema_store(self, app: str, stream: str) -> SchemaStore:
        """Where the writer schemas of ``stream`` are kept (for Avro and the like)."""
        raise Misconfigured(f"{type(self).__name__} cannot store schemas")

    def sync_log(self) -> SyncLog:
        """Synchronous, picklable access to the partition logs, for engines that read and
        write from processes of their own (runnel-spark)."""
        raise Misconfigured(f"{type(self).__name__} offers no synchronous access to its logs")


def transport_for(url: str, settings: Settings) -> Transport:
    """Build the transport that a plugin registered for ``url``'s scheme."""
    from runnel.plugins.manager import registry

    parts = urlsplit(url)
    if not parts.scheme or "://" not in url:
        raise Misconfigured(
            f"redis_url {redact(url)!r} has no scheme (write it as redis://host:port/db)"
        )
    try:
        _ = parts.port  # checks it: a port that is not a number raises
    except ValueError as exc:
        raise Misconfigured(f"redis_url {redact(url)!r}: {exc}") from None
    scheme = parts.scheme
    reg = registry()
    if scheme not in reg.names("transport"):
        known = ", ".join(f"{s}://" for s in reg.names("transport")) or "none"
        hint = (
            " (is runnel-redis installed? pip install runnel[redis])" if "redis" in scheme else ""
        )
        raise Misconfigured(f"no transport for {scheme}:// URLs{hint}; known: {known}")
    return reg.get("transport", scheme).factory(url, settings)
