"""Deprecated: moved to :mod:`runnel.store.synclog` (the store interface by role, see
docs/plugins.md). Importing from here works for one release, with a warning."""

import warnings

from runnel.store.synclog import (
    MAX_SEQ,
    Entries,
    Extent,
    LogError,
    LogFull,
    PartlyAppended,
    SyncLog,
    next_id,
)

__all__ = [
    "MAX_SEQ",
    "Entries",
    "Extent",
    "LogError",
    "LogFull",
    "PartlyAppended",
    "SyncLog",
    "next_id",
]

warnings.warn(
    "runnel.synclog moved to runnel.store.synclog; import from there",
    DeprecationWarning,
    stacklevel=2,
)
