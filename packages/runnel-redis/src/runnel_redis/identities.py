"""The arguments of lua/append_identified.lua, and reading back what a partition
remembers of identities (lua/identities.lua says how the state is kept)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runnel.store.identity import CallIdentity, Identity, KeyedIdentity, Window, call_key
from runnel.store.log import PartitionId


def identity_marks(identity: Identity) -> list[Any] | None:
    """Each entry's argument after its stream's index in lua/append_identified.lua: its
    number, or ``k`` and its key (empty for none); None for a call identity (none)."""
    if isinstance(identity, CallIdentity):
        return None
    if isinstance(identity, KeyedIdentity):
        return [b"" if key is None else b"k" + key for key in identity.keys]
    return list(identity.seqs)


def identity_head(
    maxlen: int | None, drop_oldest: bool, streams: int, identity: Identity, window: Window
) -> list[Any]:
    """lua/append_identified.lua's arguments before the entries."""
    if isinstance(identity, CallIdentity):
        # A first try is only remembered: no partition can have it yet.
        kind, ident = b"n" if identity.first_try else b"c", call_key(identity)
    elif isinstance(identity, KeyedIdentity):
        kind, ident = b"k", b""
    else:
        kind, ident = b"s", identity.producer.encode()
    cap = maxlen if maxlen is not None else b""
    drop = b"drop" if drop_oldest else b""
    return [cap, drop, streams, kind, window.ms, window.half_keys, ident]


def remembered_counts(
    partitions: Sequence[PartitionId], replies: Sequence[Any]
) -> dict[PartitionId, tuple[int, int]]:
    """:meth:`RedisTransport.remembered` from a TIME reply, then per partition the
    lengths of its generations and its producers hash."""
    seconds, micros = replies[0]
    now = int(seconds) * 1000 + int(micros) // 1000
    out = {}
    for n, partition in enumerate(partitions):
        first, second, producers = replies[1 + 3 * n : 4 + 3 * n]
        alive = sum(1 for state in producers.values() if int(state.split()[1]) > now)
        out[partition] = (int(first) + int(second), alive)
    return out
