"""Identities on appends: how a store recognises an append, or a record, it already took.

A caller that cannot know whether an append went in (its reply was lost) sends it again
with the same identity; the store drops what the partition already holds and replies
with the ids it was given the first time, so a retry never duplicates and looks like
the first send. Three kinds, one per append call (:meth:`runnel.store.Log.append`'s
``identity``):

- :class:`CallIdentity`: one call of one producer, retried as it was (what
  :meth:`runnel.stream.Stream.send` gives each append by default). Costs the store one
  remembered key per partition per call, whatever the number of records.
- :class:`SequencedIdentity`: a producer numbering its records, rising per partition
  (``runnel sendmany``, the Spark sink): a record numbered at or below the highest the
  partition took from that producer is a duplicate. One small state per producer and
  partition, whatever the number of records or calls.
- :class:`KeyedIdentity`: an application's own key per record (a stream's
  ``idempotency_key``): one remembered key per record.

Call identities and keys are remembered per partition in a :class:`Window` (time and
count bounded: docs/guide.md, "Sending each record once"); producers' numbers for
``window.seconds`` after their last call. Entries themselves are unchanged: the state
lives beside the partition, so runnel 0.1's readers and writers are unaffected.

Nothing here names a store command; each store keeps the state its own way.
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from runnel.exceptions import IdentityError

UNKNOWN_ID = b"0-0"
"""The id a duplicate is replied with when the store no longer knows its original id
(an entry trimmed or deleted since, a sequenced record older than the producer's last
append to its partition)."""

MAX_SEQ = 2**53 - 1
"""The largest sequence number: stores may keep them as doubles (Lua), exact up to here."""


@dataclass(frozen=True, slots=True)
class CallIdentity:
    """Call ``number`` of ``producer``: an append retried with the same identity is
    recognised per partition as a whole, and replied with the ids of its first time."""

    producer: str
    """Unique per producer (random per App instance and process)."""
    number: int
    """The producer's count of its calls; a retry of a call reuses its number."""
    first_try: bool = False
    """The caller's word that this call was never sent before (its number is new), so
    no partition can have it: the store only remembers it, without looking it up. Only
    for a call's first try; every other one (:meth:`retried`) is looked up."""

    def subset(self, indexes: Sequence[int]) -> CallIdentity:
        """The identity of a try of some of the call's entries (the partitions that did
        not take their part): the same call, tried again (state is per partition, and each
        partition's part of a call is whole)."""
        return self.retried()

    def retried(self) -> CallIdentity:
        """This call's identity for a try after the first (looked up)."""
        return CallIdentity(self.producer, self.number) if self.first_try else self


@dataclass(frozen=True, slots=True)
class SequencedIdentity:
    """Records numbered by ``producer``: ``seqs[i]`` is entry ``i``'s number; within each
    partition they rise across the producer's calls (the caller guarantees it: a number
    at or below the partition's highest from this producer is taken for a duplicate)."""

    producer: str
    seqs: Sequence[int]

    def subset(self, indexes: Sequence[int]) -> SequencedIdentity:
        return SequencedIdentity(self.producer, [self.seqs[i] for i in indexes])

    def retried(self) -> SequencedIdentity:
        return self


@dataclass(frozen=True, slots=True)
class KeyedIdentity:
    """An application key per entry (None: that entry has none and is always appended):
    an entry whose key its partition took within the window is a duplicate."""

    keys: Sequence[bytes | None]

    def subset(self, indexes: Sequence[int]) -> KeyedIdentity:
        return KeyedIdentity([self.keys[i] for i in indexes])

    def retried(self) -> KeyedIdentity:
        return self


Identity: TypeAlias = CallIdentity | SequencedIdentity | KeyedIdentity


@dataclass(frozen=True, slots=True)
class Window:
    """How long, and how many, call identities and keys a partition remembers.

    A key (or call) is remembered for at least ``seconds / 2`` and at most ``seconds``
    after its append, unless ``keys / 2`` later ones came first; a partition holds at
    most ``keys`` of them. Producers' numbers are remembered ``seconds`` after their
    last call to the partition."""

    seconds: float = 3600.0
    keys: int = 10_000

    def __post_init__(self) -> None:
        if not self.seconds > 0.001:
            raise IdentityError(f"an idempotence window is over 1 ms, not {self.seconds!r} s")
        if isinstance(self.keys, bool) or not isinstance(self.keys, int) or self.keys < 2:
            raise IdentityError(f"an idempotence window holds at least 2 keys, not {self.keys!r}")

    @property
    def ms(self) -> int:
        return int(self.seconds * 1000)

    @property
    def half_keys(self) -> int:
        """Keys one generation holds (a partition keeps two)."""
        return self.keys // 2


DEFAULT_WINDOW = Window()


class Appended(list[bytes]):
    """What an append returns: the entries' ids in order (a list, as before identities),
    and how many of them were :attr:`duplicates`, recognised by their identity as in
    already and not appended again (their ids are the original ones, or
    :data:`UNKNOWN_ID`)."""

    __slots__ = ("duplicates",)

    def __init__(self, ids: Iterable[bytes] = (), duplicates: int = 0) -> None:
        super().__init__(ids)
        self.duplicates = duplicates

    def __repr__(self) -> str:
        return f"Appended({list.__repr__(self)}, duplicates={self.duplicates})"


def call_key(identity: CallIdentity) -> bytes:
    """What a partition remembers a call as, among application keys (``b"k"`` + key)."""
    return b"c%b:%d" % (identity.producer.encode(), identity.number)


def covers_all(identity: Identity | None) -> bool:
    """Whether every entry of an append carries an identity, so that the whole append
    may be sent again safely (a keyed one with an entry without a key may not)."""
    if identity is None:
        return False
    if isinstance(identity, KeyedIdentity):
        return all(key is not None for key in identity.keys)
    return True


def checked(
    identity: Identity,
    entries: Sequence[tuple[Hashable, object]],
    ids: Sequence[str] | None = None,
) -> Identity:
    """``identity`` for an append of ``entries`` (``(partition, fields)``), checked
    before anything is sent: one number or key per entry, numbers rising within each
    partition and in range, a producer named; not with explicit ids.
    :class:`IdentityError` if not."""
    if ids is not None:
        raise IdentityError("an append with explicit entry ids cannot carry an identity")
    if isinstance(identity, CallIdentity):
        _producer(identity.producer)
        if not isinstance(identity.number, int) or identity.number < 0:
            raise IdentityError(f"a call's number is an int >= 0, not {identity.number!r}")
        return identity
    if isinstance(identity, SequencedIdentity):
        _producer(identity.producer)
        _count(len(identity.seqs), len(entries), "numbers")
        last: dict[Hashable, int] = {}
        for n, (seq, (partition, _)) in enumerate(zip(identity.seqs, entries, strict=True)):
            if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= MAX_SEQ:
                raise IdentityError(f"number {n + 1} is not an int from 0 to 2**53 - 1: {seq!r}")
            before = last.get(partition)
            if before is not None and seq <= before:
                raise IdentityError(
                    f"number {n + 1} ({seq}) is not above {before}, the number before it "
                    "to the same partition: a producer's numbers rise within a partition"
                )
            last[partition] = seq
        return identity
    if isinstance(identity, KeyedIdentity):
        _count(len(identity.keys), len(entries), "keys")
        for n, key in enumerate(identity.keys):
            if key is not None and not isinstance(key, bytes):
                raise IdentityError(f"key {n + 1} is bytes or None, not {key!r}")
        return identity
    raise IdentityError(f"not an identity: {identity!r}")


def _producer(name: object) -> None:
    if not isinstance(name, str) or not name:
        raise IdentityError(f"a producer is a non-empty str, not {name!r}")


def _count(given: int, entries: int, what: str) -> None:
    if given != entries:
        raise IdentityError(f"{given} {what} for {entries} entries: give one per entry")


def key_bytes(value: object) -> bytes | None:
    """An application key as the store keeps it: bytes as they are, text as UTF-8, None
    as no key, anything else (numbers) as its ``str``."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return str(value).encode()


_forks = 0


def _forked() -> None:
    global _forks
    _forks += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class Producer:
    """The :class:`CallIdentity` of each append call of one App instance: a random
    producer name, made again in a forked child (which must not share its parent's),
    and a count of calls."""

    def __init__(self) -> None:
        self._renew()

    def _renew(self) -> None:
        self.name = secrets.token_hex(8)
        self._numbers = itertools.count(1)
        self._fork = _forks

    def call(self) -> CallIdentity:
        """A new call's identity, for its first try (a retry: :meth:`CallIdentity.retried`)."""
        if self._fork != _forks:
            self._renew()
        return CallIdentity(self.name, next(self._numbers), first_try=True)
