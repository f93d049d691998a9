"""Deprecated: moved to :mod:`runnel.store.log` (the store interface by role, see
docs/plugins.md). Importing from here works for one release, with a warning."""

import warnings

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

__all__ = [
    "NEW",
    "PENDING",
    "Entry",
    "Fields",
    "Log",
    "LogAdmin",
    "PartitionId",
    "Position",
    "trim_slack",
]

warnings.warn(
    "runnel.transport moved to runnel.store.log; import from there",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str) -> object:
    if name == "Transport":
        raise AttributeError(
            "runnel.transport.Transport is gone: a store is now a runnel.store.Backend "
            "giving each role (log, coordination, jobs, schemas); see docs/plugins.md"
        )
    raise AttributeError(name)
