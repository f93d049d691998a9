"""Deprecated: moved to :mod:`runnel.store.coordination` (the store interface by role, see
docs/plugins.md). Importing from here works for one release, with a warning."""

import warnings

from runnel.store.coordination import (
    Coordination,
    Leadership,
    Member,
    Members,
    Quarantine,
    ReadResult,
    members_from_json,
    members_to_json,
)

__all__ = [
    "Coordination",
    "Leadership",
    "Member",
    "Members",
    "Quarantine",
    "ReadResult",
    "members_from_json",
    "members_to_json",
]

warnings.warn(
    "runnel.coordination moved to runnel.store.coordination; import from there",
    DeprecationWarning,
    stacklevel=2,
)
