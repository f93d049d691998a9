"""The arguments of lua/commit.lua: what a commit stores, acknowledges and appends, packed
in the order the script reads them (a read's transaction queues the same call)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Protocol, cast

from runnel.store.log import PartitionId
from runnel.store.state import Commit
from runnel_redis import resp

if TYPE_CHECKING:
    from runnel_redis.layout import KeyLayout


class CommitKeys(Protocol):
    """The keys a commit names, as a partition's coordination spells them (a protocol,
    so that this module does not import the coordination that imports it)."""

    layout: KeyLayout

    def key_of(self, partition: PartitionId) -> str: ...
    def lock_key(self, partition: PartitionId) -> str: ...
    def table_key(self, table: str, partition: PartitionId) -> str: ...
    def deadlines_key(self, table: str, partition: PartitionId) -> str: ...


__all__ = ["CAP", "RELAYED", "TARGET", "changes", "commit_arguments"]


def changes(commit: Commit) -> bool:
    """Whether a commit stores or appends anything (else its ids alone go, by XACK)."""
    return bool(commit.writes or commit.sends or commit.deadlines)


def commit_arguments(
    coordination: CommitKeys,
    partitions: Sequence[PartitionId],
    commits: Mapping[PartitionId, Commit],
    outbox: Callable[[PartitionId], str] | None = None,
    pack: bool = False,
) -> tuple[list[str], list[resp.Arg], int]:
    """KEYS and ARGV (after owner and group) of lua/commit.lua for these partitions, and
    how many arguments ARGV counts. With ``pack``, the values a table stores are in ARGV
    packed already, one :class:`~runnel_redis.resp.Packed` per table (for
    :func:`~runnel_redis.resp.bulks`).

    Outputs go to their streams, or with ``outbox`` (a Redis Cluster, where they are in
    other slots) to the committing partition's outbox, naming stream and cap in two
    fields of their own (:data:`TARGET`, :data:`CAP`) for :func:`relay_arguments`."""
    keys: list[str] = []
    args: list[resp.Arg] = []
    count = 0  # what packed arguments stand for beyond themselves
    targets: dict[str, int] = {}
    tables = {
        p: list(dict.fromkeys([*commits[p].writes, *commits[p].deadlines])) for p in partitions
    }
    first_target = 1 + sum(2 + 2 * len(tables[p]) for p in partitions)
    for p in partitions:
        commit = commits[p]
        keys += (coordination.lock_key(p), coordination.key_of(p))
        args += (len(tables[p]), len(commit.ids), *commit.ids)
        for table in tables[p]:
            keys += (coordination.table_key(table, p), coordination.deadlines_key(table, p))
            values = commit.writes.get(table, {})
            dels: list[bytes] = []
            sets = cast(Mapping[bytes, bytes], values)  # unless it deletes keys:
            if None in values.values():
                dels = [k for k, v in values.items() if v is None]
                sets = {k: v for k, v in values.items() if v is not None}
            args.append(len(sets))
            if pack and sets:
                args.append(resp.pairs(sets))
                count += 2 * len(sets) - 1
            else:
                args += chain.from_iterable(sets.items())
            args.append(len(dels))
            args += dels
            whens = commit.deadlines.get(table, {})
            scored = [(k, w) for k, w in whens.items() if w is not None]
            dropped = [k for k, w in whens.items() if w is None]
            args.append(len(scored))
            for key, when in scored:
                args += (repr(float(when)), key)
            args += (len(dropped), *dropped)
        args.append(len(commit.sends))
        for sends in commit.sends:
            args += (len(sends.ids), *sends.ids, len(sends.outputs))
            for target, fields, cap in sends.outputs:
                stream = coordination.key_of(target)
                if outbox is not None:
                    where = outbox(p)
                    relayed = coordination.layout.relayed(*target)
                    extra: list[resp.Arg] = [TARGET, stream, RELAYED, relayed, CAP, cap or b""]
                    cap = None
                else:
                    where, extra = stream, []
                index = targets.get(where)
                if index is None:
                    index = targets[where] = first_target + len(targets)
                args += (index, cap if cap else b"", len(fields) + len(extra) // 2, *extra)
                for item in fields.items():
                    args += item
    return keys + list(targets), args, len(args) + count


TARGET = b"\x00to"
RELAYED = b"\x00relayed"
CAP = b"\x00cap"
"""The fields of an outbox entry that name where it goes (never a record's field: those
are names, not starting with a NUL byte)."""
