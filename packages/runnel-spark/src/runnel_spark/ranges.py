"""Entry ids, id ranges and splits: how Spark's reads are planned.

Entry ids are ``MILLISECONDS-SEQUENCE``. The options take ``-`` (the first), ``+`` (the
last), an id, ``MS`` (``MS-0`` as a start, ``MS-<max>`` as an end) or an ISO time; a
range handed to the store is two ids, both included.
"""

from __future__ import annotations

import dataclasses
import datetime
import math

from runnel.exceptions import Misconfigured
from runnel.store import synclog

MAX_SEQ = 2**64 - 1
Id = tuple[int, int]
FIRST: Id = (0, 0)
LAST: Id = (2**64 - 1, MAX_SEQ)


def parse_id(text: str, *, end: bool, option: str = "id") -> Id:
    """``-``, ``+``, ``MS``, ``MS-SEQ`` or an ISO 8601 time; a bare time is a whole millisecond."""
    text = text.strip()
    if text == "-":
        return FIRST
    if text == "+":
        return LAST
    ms, sep, seq = text.partition("-")
    if ms.isdigit() and (not sep or seq.isdigit()):
        return int(ms), int(seq) if sep else (MAX_SEQ if end else 0)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise Misconfigured(
            f"option {option}={text!r} is not an entry id (MS-SEQ or MS), '-', '+' or an ISO time"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    millis = int(moment.timestamp() * 1000)
    return millis, MAX_SEQ if end else 0


def show(xid: Id) -> str:
    return f"{xid[0]}-{xid[1]}"


def split_id(raw: bytes | str) -> Id:
    text = raw.decode() if isinstance(raw, bytes) else raw
    ms, _, seq = text.partition("-")
    return int(ms), int(seq)


@dataclasses.dataclass
class Extent:
    """What a partition holds: how many entries, the first and last id (None if empty)."""

    length: int
    first: Id | None
    last: Id | None


def extent(found: synclog.Extent) -> Extent:
    """A partition's extent as the log reports it, with ids parsed."""
    first = split_id(found.first) if found.first is not None else None
    last = split_id(found.last) if found.last is not None else None
    return Extent(found.length, first, last)


def plan(extent: Extent, lo: Id, hi: Id, size: int) -> list[tuple[str, str]]:
    """Cut the entries of one partition between ``lo`` and ``hi`` (inclusive) into ranges
    of about ``size`` entries each.

    Counting entries would mean reading them, so the cut is by time: the range's share of
    the partition's time span, times its length, estimates how many entries it holds, and
    that many are spread over equal slices of milliseconds. Bursty streams give uneven
    splits, never wrong ones.
    """
    if extent.first is None or extent.last is None:
        return []
    lo, hi = max(lo, extent.first), min(hi, extent.last)
    if lo > hi:
        return []
    span = hi[0] - lo[0] + 1
    whole = extent.last[0] - extent.first[0] + 1
    estimate = extent.length * span / whole
    count = max(1, min(math.ceil(estimate / size), span))
    bounds = [lo[0] + span * i // count for i in range(count + 1)]
    out = []
    for i in range(count):
        start = show(lo) if i == 0 else f"{bounds[i]}-0"
        end = show(hi) if i == count - 1 else f"{bounds[i + 1] - 1}-{MAX_SEQ}"
        out.append((start, end))
    return out
