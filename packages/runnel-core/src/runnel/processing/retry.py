"""Deprecated: moved to :mod:`runnel.runtime.retry`. Importing from here works for one
release, with a warning."""

import warnings

from runnel.runtime.retry import (
    BLOCK_CAP_MS,
    FATAL,
    Backoff,
    Stopped,
    cancel_and_wait,
    outage,
    reraise_if_cancelled,
    retrying,
    until_stopped,
)

__all__ = [
    "BLOCK_CAP_MS",
    "FATAL",
    "Backoff",
    "Stopped",
    "cancel_and_wait",
    "outage",
    "reraise_if_cancelled",
    "retrying",
    "until_stopped",
]

warnings.warn(
    "runnel.processing.retry moved to runnel.runtime.retry; import from there",
    DeprecationWarning,
    stacklevel=2,
)
