"""Deprecated: moved to :mod:`runnel.store.jobs` (the store interface by role, see
docs/plugins.md). Importing from here works for one release, with a warning."""

import warnings

from runnel.store.jobs import (
    JobStore,
)

__all__ = ["JobStore"]

warnings.warn(
    "runnel.jobs.store moved to runnel.store.jobs; import from there",
    DeprecationWarning,
    stacklevel=2,
)
