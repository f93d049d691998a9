"""The store interface, by role: what a store plugin implements (docs/plugins.md).

:class:`Backend` gives each role; the roles are :class:`Log` (and the optional
:class:`LogAdmin`), :class:`Coordination` and :class:`Leadership`, :class:`JobStore`,
:class:`SchemaStore` and the optional :class:`SyncLog`. Their errors are in
:mod:`runnel.store.errors`. ``tests/contract`` is the suite every store must pass.
"""

from runnel.store.backend import Backend, admin_of
from runnel.store.coordination import (
    Coordination,
    Leadership,
    Member,
    Members,
    Quarantine,
    ReadResult,
)
from runnel.store.jobs import JobStore
from runnel.store.log import (
    NEW,
    PENDING,
    Entry,
    Fields,
    Log,
    LogAdmin,
    PartitionId,
    Position,
    trim_slack,
)
from runnel.store.resolve import backend_for
from runnel.store.schemas import Check, SchemaStore
from runnel.store.state import Commit, Output, Sends, TableStore, Writes
from runnel.store.synclog import Entries, Extent, SyncLog

__all__ = [
    "NEW",
    "PENDING",
    "Backend",
    "Check",
    "Commit",
    "Coordination",
    "Entries",
    "Entry",
    "Extent",
    "Fields",
    "JobStore",
    "Leadership",
    "Log",
    "LogAdmin",
    "Member",
    "Members",
    "Output",
    "PartitionId",
    "Position",
    "Quarantine",
    "ReadResult",
    "SchemaStore",
    "Sends",
    "SyncLog",
    "TableStore",
    "Writes",
    "admin_of",
    "backend_for",
    "trim_slack",
]
