"""Entry ids, id ranges and splits: the synchronous Redis Streams reads Spark plans with.

Entry ids are ``MILLISECONDS-SEQUENCE``. A range is what ``XRANGE`` takes: ``-``, ``+``, an
id, ``MS`` (``MS-0`` as a start, ``MS-<max>`` as an end) or ``(ID`` (exclusive).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Iterator, Sequence
from typing import cast

import redis

from runnel.exceptions import Misconfigured

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


def extents(client: redis.Redis, keys: Sequence[str]) -> list[Extent]:
    """Length, first and last id of each partition, in one round trip."""
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.xlen(key)
            pipe.xrange(key, count=1)
            pipe.xrevrange(key, count=1)
        replies = pipe.execute()
    out = []
    for i in range(0, len(replies), 3):
        length, first, last = replies[i : i + 3]
        out.append(
            Extent(
                int(length),
                split_id(first[0][0]) if first else None,
                split_id(last[0][0]) if last else None,
            )
        )
    return out


def last_ids(client: redis.Redis, keys: Sequence[str]) -> list[str | None]:
    """The newest entry id of each partition (None when it is empty), in one round trip."""
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.xrevrange(key, count=1)
        replies = pipe.execute()
    return [reply[0][0].decode() if reply else None for reply in replies]


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


Entries = list[tuple[bytes, dict[bytes, bytes]]]


def read_range(client: redis.Redis, key: str, lo: str, hi: str, count: int) -> Iterator[Entries]:
    """The entries of ``key`` from ``lo`` to ``hi``, ``count`` per round trip."""
    while True:
        # redis-py types replies as bytes | str; a client without decode_responses gives bytes.
        entries = cast(Entries | None, client.xrange(key, min=lo, max=hi, count=count))
        if not entries:
            return
        yield entries
        if len(entries) < count:
            return
        last = entries[-1][0]
        lo = "(" + (last.decode() if isinstance(last, bytes) else last)
