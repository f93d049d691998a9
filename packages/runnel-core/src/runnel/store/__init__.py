"""The store interface, by role: what a store plugin implements (docs/plugins.md).

:class:`Backend` gives each role; the roles are :class:`Log` (and the optional
:class:`LogAdmin`), :class:`Coordination` and :class:`Leadership`, :class:`JobStore`,
:class:`SchemaStore` and the optional :class:`SyncLog`. Their errors are in
:mod:`runnel.store.errors`. ``tests/contract`` is the suite every store must pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runnel.lazy import lazy_names

_WHERE = {
    "admin_of": "runnel.store.backend",
    "Appended": "runnel.store.identity",
    "CallIdentity": "runnel.store.identity",
    "Identity": "runnel.store.identity",
    "KeyedIdentity": "runnel.store.identity",
    "SequencedIdentity": "runnel.store.identity",
    "Window": "runnel.store.identity",
    "Backend": "runnel.store.backend",
    "backend_for": "runnel.store.resolve",
    "Check": "runnel.store.schemas",
    "Commit": "runnel.store.state",
    "Coordination": "runnel.store.coordination",
    "Entries": "runnel.store.synclog",
    "Entry": "runnel.store.log",
    "Extent": "runnel.store.synclog",
    "Fields": "runnel.store.log",
    "JobStore": "runnel.store.jobs",
    "Leadership": "runnel.store.coordination",
    "Log": "runnel.store.log",
    "LogAdmin": "runnel.store.log",
    "Member": "runnel.store.coordination",
    "Members": "runnel.store.coordination",
    "NEW": "runnel.store.log",
    "Output": "runnel.store.state",
    "PartitionId": "runnel.store.log",
    "PENDING": "runnel.store.log",
    "Position": "runnel.store.log",
    "Quarantine": "runnel.store.coordination",
    "ReadResult": "runnel.store.coordination",
    "SchemaStore": "runnel.store.schemas",
    "Sends": "runnel.store.state",
    "SyncLog": "runnel.store.synclog",
    "TableStore": "runnel.store.state",
    "trim_slack": "runnel.store.log",
    "Writes": "runnel.store.state",
}
"""Where each name lives: imported on first use (PEP 562), so that a worker of streams
alone does not import the job store's role (and with it the job queue's model)."""

if TYPE_CHECKING:
    from runnel.store.backend import Backend, admin_of
    from runnel.store.coordination import (
        Coordination,
        Leadership,
        Member,
        Members,
        Quarantine,
        ReadResult,
    )
    from runnel.store.identity import (
        Appended,
        CallIdentity,
        Identity,
        KeyedIdentity,
        SequencedIdentity,
        Window,
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


__getattr__, __dir__ = lazy_names("runnel.store", _WHERE, globals())


__all__ = [
    "NEW",
    "PENDING",
    "Appended",
    "Backend",
    "CallIdentity",
    "Check",
    "Commit",
    "Coordination",
    "Entries",
    "Entry",
    "Extent",
    "Fields",
    "Identity",
    "JobStore",
    "KeyedIdentity",
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
    "SequencedIdentity",
    "SyncLog",
    "TableStore",
    "Window",
    "Writes",
    "admin_of",
    "backend_for",
    "trim_slack",
]
