"""Deprecated: moved to :mod:`runnel.store.schemas` (the store interface by role, see
docs/plugins.md). Importing from here works for one release, with a warning."""

import warnings

from runnel.store.schemas import (
    Check,
    SchemaStore,
)

__all__ = ["Check", "SchemaStore"]

warnings.warn(
    "runnel.schemas moved to runnel.store.schemas; import from there",
    DeprecationWarning,
    stacklevel=2,
)
