"""Append-only logs with consumer groups, as plain data: what a memory store holds.

Nothing here locks or waits; :class:`~runnel.memory.server.MemoryServer` calls these
under its lock. Entry ids are ``(milliseconds, sequence)`` pairs shown as ``b"ms-seq"``,
the shape Redis uses, so the CLI's id parsing and time display work unchanged.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from runnel.exceptions import GroupMissing

Id = tuple[int, int]
ZERO: Id = (0, 0)


def parse_id(raw: bytes | str) -> Id:
    """``b"1526919030474-55"`` (or ``"1526919030474"``) as a pair; ValueError if not one."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def show_id(xid: Id) -> bytes:
    return f"{xid[0]}-{xid[1]}".encode()


@dataclass
class Group:
    """A consumer group: where "new" starts, and what is delivered but unacknowledged
    (id -> consumer, in id order: new deliveries always come after every pending one)."""

    last_delivered: Id = ZERO
    pending: dict[Id, str] = field(default_factory=dict)


@dataclass
class PartitionLog:
    """One partition: entries in id order, and the groups reading it."""

    ids: list[Id] = field(default_factory=list)
    fields: dict[Id, dict[bytes, bytes]] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    last_id: Id = ZERO
    lost: dict[str, int] = field(default_factory=dict)
    """Per group: entries trimmed before it read them (``drop_oldest``)."""
    added: int = 0
    """Entries ever appended (trimming and removing leave it alone)."""

    def __len__(self) -> int:
        return len(self.ids)

    def append(
        self, values: dict[bytes, bytes], maxlen: int | None, now_ms: int, at: Id | None = None
    ) -> Id:
        """Add an entry, at id ``at`` when given (the caller checked it is above the last)."""
        ms, seq = self.last_id
        if at is not None:
            xid = at
        else:
            xid = (now_ms, 0) if now_ms > ms else (ms, seq + 1)
        self.ids.append(xid)
        self.fields[xid] = values
        self.last_id = xid
        self.added += 1
        if maxlen is not None and len(self.ids) > maxlen:
            self._drop(len(self.ids) - maxlen)
        return xid

    # Holding a log to its size (see Transport.append).

    def needed(self) -> tuple[int, str | None]:
        """How many of the oldest entries every group has acknowledged (entries before
        its oldest pending one, else up to its last delivered), and the group that has
        done the fewest (None: no group, nothing is needed)."""
        done, slowest = len(self.ids), None
        for name, group in self.groups.items():
            if group.pending:
                count = bisect.bisect_left(self.ids, min(group.pending))
            else:
                count = bisect.bisect_right(self.ids, group.last_delivered)
            if slowest is None or count < done:
                done, slowest = count, name
        return done, slowest

    def refuses(self, adding: int, maxlen: int, slack: int) -> str | None:
        """The group that keeps ``adding`` more entries from fitting in ``maxlen`` (plus
        ``slack``) once what no group needs is trimmed; None if they fit."""
        total = len(self.ids) + adding
        if total <= maxlen + slack:
            return None
        done, slowest = self.needed()
        if slowest is None:
            return None
        free = min(done, total - maxlen)
        return slowest if total - free > maxlen + slack else None

    def trim(self, maxlen: int, slack: int, drop_oldest: bool) -> None:
        """Back to ``maxlen`` once past ``maxlen + slack``: only what every group has
        acknowledged, or (``drop_oldest``) the oldest whatever their state, counting for
        each group those it never read (its last delivered id moves past them)."""
        want = len(self.ids) - maxlen
        if want <= slack:
            return
        if not drop_oldest:
            self._drop(min(want, self.needed()[0]))
            return
        last = self.ids[want - 1]
        for name, group in self.groups.items():
            if group.last_delivered < last:
                unread = want - bisect.bisect_right(self.ids, group.last_delivered)
                self.lost[name] = self.lost.get(name, 0) + unread
                group.last_delivered = last
        self._drop(want)

    def _drop(self, count: int) -> None:
        for old in self.ids[:count]:
            del self.fields[old]
        del self.ids[:count]

    def after(self, xid: Id, count: int | None = None) -> list[Id]:
        start = bisect.bisect_right(self.ids, xid)
        end = None if count is None else start + count
        return self.ids[start:end]

    def entry(self, xid: Id) -> tuple[bytes, dict[bytes, bytes] | None]:
        """An entry as read back: fields None if it was trimmed or deleted since."""
        values = self.fields.get(xid)
        return show_id(xid), (dict(values) if values is not None else None)

    def deliver_new(self, group: Group, consumer: str, count: int) -> list[Id]:
        fresh = self.after(group.last_delivered, count)
        for xid in fresh:
            group.pending[xid] = consumer
        if fresh:
            group.last_delivered = fresh[-1]
        return fresh

    @staticmethod
    def own_pending(group: Group, consumer: str, after: Id, count: int) -> list[Id]:
        out = []
        for xid, owner in group.pending.items():
            if xid > after and owner == consumer:
                out.append(xid)
                if len(out) == count:
                    break
        return out

    def remove(self, ids: Iterable[Id]) -> int:
        gone = {xid for xid in ids if xid in self.fields}
        for xid in gone:
            del self.fields[xid]
        if gone:
            self.ids = [xid for xid in self.ids if xid not in gone]
        return len(gone)

    def lag(self, group: Group) -> int:
        return len(self.after(group.last_delivered))


class NoGroup(GroupMissing):
    """Read or acknowledged in a consumer group that was never made (Redis: NOGROUP)."""


def wall_ms(clock: Callable[[], float] = time.time) -> int:
    return int(clock() * 1000)


def ack(group: Group, ids: Sequence[bytes]) -> None:
    for raw in ids:
        group.pending.pop(parse_id(raw), None)


def decode_fields(values: Any) -> dict[bytes, bytes]:
    """Field values as bytes, the way Redis stores any value it is given."""
    return {_bytes(k): _bytes(v) for k, v in values.items()}


def _bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bool):
        return b"1" if value else b"0"
    if isinstance(value, int | float):
        return repr(value).encode()
    return str(value).encode()
