"""The errors a store raises, so that the core knows what to retry.

A store plugin translates its client library's errors into these at one seam (runnel-redis:
``runnel_redis/seam.py``): :class:`Unavailable` for a store that is away or slow (the core
retries it), :class:`AccessDenied` and :class:`StoreFull` for refusals (retrying cannot
help), any other :class:`TransportError` for a failure of the store itself. Anything else
out of a store call is a bug, and surfaces. The classes live in :mod:`runnel.exceptions`
(users catch them there); this is the list a store author works from.
"""

from runnel.exceptions import (
    AccessDenied,
    EntryIdError,
    NotConnected,
    NotReplicated,
    PartitionFull,
    PartlySent,
    StoreFull,
    TransportError,
    Unavailable,
)
from runnel.store.synclog import LogError, LogFull, PartlyAppended

__all__ = [
    "AccessDenied",
    "EntryIdError",
    "LogError",
    "LogFull",
    "NotConnected",
    "NotReplicated",
    "PartitionFull",
    "PartlyAppended",
    "PartlySent",
    "StoreFull",
    "TransportError",
    "Unavailable",
]
