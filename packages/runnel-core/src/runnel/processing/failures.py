"""What a failure log line says: which processor, stream, partition and entry (and key).

An operator reading one line must be able to find the event in Redis, skip it or replay
it, so every line about a failed event names all of that, as text for people and as
``extra`` fields for JSON logs.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from runnel.text import plural
from runnel.types import Event, Partition


def failure_fields(
    processor: str, partition: Partition, inflight: Sequence[Event]
) -> dict[str, Any]:
    """The ``extra`` fields of a failure line (``key`` only when the record decoded)."""
    fields: dict[str, Any] = {
        "processor": processor,
        "stream": partition.stream.name,
        "partition": partition.number,
        "entry_id": _text(inflight[0].xid) if inflight else None,
    }
    if len(inflight) > 1:
        fields["entry_ids"] = [_text(e.xid) for e in inflight]
    key = _key(inflight[0]) if inflight else None
    if key is not None:
        fields["key"] = key
    return fields


def failure_text(fields: dict[str, Any]) -> str:
    """``processor 'p' on stream s partition 2 entry 1-0 (key 'k')`` from those fields."""
    text = f"processor {fields['processor']!r} on stream {fields['stream']} "
    text += f"partition {fields['partition']}"
    ids = fields.get("entry_ids")
    if ids:
        text += f" entries {ids[0]}..{ids[-1]} ({plural(len(ids), 'event')})"
    elif fields["entry_id"] is not None:
        text += f" entry {fields['entry_id']}"
    else:
        text += " (no event in flight)"
    if "key" in fields:
        text += f" (key {fields['key']!r})"
    return text


def _key(event: Event) -> Any:
    """The partitioning key of the event's record, or None if it does not decode."""
    try:
        key = event.partition.stream.key_of(event.record)
    except Exception:  # user data and code (a record that does not decode, partition_by)
        return None
    return key if isinstance(key, str | int | float | bool) else str(key)


def _text(xid: bytes | str) -> str:
    return xid.decode() if isinstance(xid, bytes) else xid


def retry_delay(
    attempt: int,
    base: float,
    cap: float,
    jitter: float = 0.0,
    rand: Callable[[], float] = random.random,
) -> float:
    """Seconds to wait before retrying a failed event for the ``attempt``-th time (from 1).

    ``base``, doubling with each attempt, never more than ``cap``. With ``jitter`` (0 to 1)
    up to that fraction is taken off at random, so that partitions failing on the same
    outage do not all come back at the same moment.
    """
    if attempt < 1:
        raise ValueError("attempt counts from 1")
    nominal = min(cap, base * 2.0 ** min(attempt - 1, 64))
    return nominal * (1.0 - jitter * rand())
