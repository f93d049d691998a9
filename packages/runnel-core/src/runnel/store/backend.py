"""A store, as the core sees it: one object that gives each role (docs/plugins.md).

A store plugin registers a factory for its URL schemes (the ``runnel_transports`` hook);
the factory returns a :class:`Backend`. The roles are small interfaces of their own, side
by side in this package:

========================  =====================================================
:class:`Log`              appending to partitions, consumer groups (log.py)
:class:`Coordination`     one processor's membership, locks, fenced reads and
                          acknowledgements, quarantine; :class:`Leadership`
                          the app's leader (coordination.py)
:class:`JobStore`         the job queue (jobs.py)
:class:`SchemaStore`      the writer schemas of a stream (schemas.py)
:class:`TableStore`       optional: tables, committed with acknowledgements (state.py)
:class:`LogAdmin`         optional: what the operating commands read and change
:class:`SyncLog`          optional: synchronous, picklable access to the logs, for
                          engines with processes of their own (Spark) (synclog.py)
========================  =====================================================

The optional parts are asked for (:meth:`Backend.admin`, :meth:`Backend.sync_log` return
None when the store has none), never tried and caught. Errors of the store reach the core
as :mod:`runnel.store.errors`; a plugin translates its client's errors there, in one place.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from runnel.exceptions import Misconfigured

if TYPE_CHECKING:
    from runnel.store.coordination import Coordination, Leadership
    from runnel.store.jobs import JobStore
    from runnel.store.log import Log, LogAdmin
    from runnel.store.schemas import SchemaStore
    from runnel.store.state import TableStore
    from runnel.store.synclog import SyncLog


class Backend(abc.ABC):
    """A store's roles, for one event loop (its connections belong to that loop)."""

    shared: bool = True
    """Whether other processes see the same data. The CLI refuses to inspect or change
    a store that is not shared (``memory://``), since it would see an empty one."""

    key_layout: str | None = None
    """The name of the store's key layout, if it has several (shown by ``runnel status``)."""

    log: Log
    """The partitioned logs: what every send and every worker uses."""

    @abc.abstractmethod
    def coordination(self, app: str, stream: str, processor: str) -> Coordination:
        """The shared state of one processor's executors (membership, locks, ...)."""

    @abc.abstractmethod
    def leadership(self, app: str) -> Leadership:
        """The app's leader election."""

    @abc.abstractmethod
    def job_store(self, app: str) -> JobStore:
        """The app's job queue (queue, schedule, dead letters, results, executors)."""

    @abc.abstractmethod
    def schema_store(self, app: str, stream: str) -> SchemaStore:
        """Where the writer schemas of ``stream`` are kept (for Avro and the like)."""

    def table_store(self, app: str) -> TableStore | None:
        """The committed state of the app's tables, if the store keeps tables (its
        coordination then commits table writes, :meth:`Coordination.commit`)."""
        return None

    def admin(self) -> LogAdmin | None:
        """The operating commands' access to the logs, if the store offers it."""
        return None

    def sync_log(self) -> SyncLog | None:
        """Synchronous, picklable access to the logs (runnel-spark), if offered."""
        return None

    def client(self) -> Any | None:
        """The store's own client library, for an app's own commands (``App.redis``), if
        it has one."""
        return None

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release connections."""


def admin_of(store: Backend) -> LogAdmin:
    """The store's :class:`LogAdmin`; :class:`Misconfigured` for a store without one."""
    admin = store.admin()
    if admin is None:
        raise Misconfigured(
            f"{type(store).__name__} offers no administration of its logs (status, dead "
            "letters, processor reset and skip)"
        )
    return admin
