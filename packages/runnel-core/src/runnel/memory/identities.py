"""What a ``memory://`` partition remembers of appends with identities, as plain data.

The same rules as the Redis store's scripts (lua/identities.lua), so that the contract
suite holds both to one behaviour: call identities and application keys in two
generations of at most ``window.keys / 2`` each, a generation started at most
``window.seconds / 2`` ago taking new ones and forgotten ``window.seconds`` after it
started; sequenced producers' state forgotten ``window.seconds`` after their last call.
Nothing here locks: :class:`~runnel.memory.log.MemoryLog` calls it under the store's lock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from runnel.memory.logs import Id, PartitionLog, show_id
from runnel.store.identity import (
    UNKNOWN_ID,
    CallIdentity,
    Identity,
    KeyedIdentity,
    SequencedIdentity,
    Window,
    call_key,
)


@dataclass
class Generation:
    """Keys (call identities and application keys) taken while it was the newest."""

    start: float
    expires: float
    keys: dict[bytes, Any] = field(default_factory=dict)


@dataclass
class ProducerState:
    """A sequenced producer on one partition: its highest number taken, when it is
    forgotten (a window after its last call), and its last append (ids, count, numbers)
    to reply a retry of it."""

    hwm: int
    expires: float
    first: Id | None = None
    last: Id | None = None
    count: int = 0
    low: int = 0
    high: int = -1


@dataclass
class Remembered:
    """One partition's identity state."""

    current: Generation | None = None
    older: Generation | None = None
    producers: dict[str, ProducerState] = field(default_factory=dict)
    duplicates: int = 0

    def live(self, now: float) -> list[Generation]:
        return [g for g in (self.current, self.older) if g is not None and g.expires > now]

    def lookup(self, key: bytes, now: float) -> Any:
        for generation in self.live(now):
            found = generation.keys.get(key)
            if found is not None:
                return found
        return None

    def remember(self, key: bytes, value: Any, now: float, window: Window) -> None:
        """Keep ``key``, in the current generation or (that one full or old) a new one,
        the older one then forgotten."""
        seconds = window.ms / 1000
        current = self.current
        if current is None or current.expires <= now or not current.keys:
            if current is not None and current.expires > now:
                current.start, current.expires = now, now + seconds
            else:
                self.current = current = Generation(now, now + seconds)
        elif len(current.keys) >= window.half_keys or now - current.start >= seconds / 2:
            self.older, self.current = current, Generation(now, now + seconds)
            current = self.current
        current.keys[key] = value

    def producer(self, name: str, now: float) -> ProducerState | None:
        found = self.producers.get(name)
        return found if found is not None and found.expires > now else None

    def count(self, now: float) -> tuple[int, int]:
        """The call identities and keys remembered, and the producers."""
        keys = sum(len(g.keys) for g in self.live(now))
        return keys, sum(1 for p in self.producers.values() if p.expires > now)


@dataclass
class Plan:
    """What an identified append does, found before anything changes: the entries to
    append, and for each duplicate its reply (an id, or the index of the entry of the
    same call whose id it takes)."""

    appending: list[int] = field(default_factory=list)
    replies: dict[int, bytes | int] = field(default_factory=dict)
    calls: dict[Any, bytes] = field(default_factory=dict)
    """Per partition of a call identity: the call's field (to remember it)."""

    @property
    def duplicates(self) -> int:
        return len(self.replies)


def plan(
    identity: Identity,
    members: dict[Any, list[int]],
    state: Callable[[Any], Remembered],
    log_of: Callable[[Any], PartitionLog],
    now: float,
    window: Window,
) -> Plan:
    """Which entries of each partition (``members``: partition -> entry indexes) are in
    already under ``identity``, and what they are replied with."""
    out = Plan()
    for partition, indexes in members.items():
        found = state(partition)
        if isinstance(identity, CallIdentity):
            key = call_key(identity)
            stored = None if identity.first_try else found.lookup(key, now)
            if stored is None:
                out.appending += indexes
                out.calls[partition] = key
            else:
                first, last, count = stored
                ids = _between(log_of(partition), first, last, count, len(indexes))
                out.replies.update(zip(indexes, ids, strict=True))
        elif isinstance(identity, SequencedIdentity):
            _sequenced(identity, indexes, found, log_of(partition), now, out)
        else:
            _keyed(identity, indexes, found, now, out)
    out.appending.sort()
    return out


def _sequenced(
    identity: SequencedIdentity,
    indexes: list[int],
    found: Remembered,
    log: PartitionLog,
    now: float,
    out: Plan,
) -> None:
    seqs = identity.seqs
    producer = found.producer(identity.producer, now)
    hwm = producer.hwm if producer is not None else -1
    old = [i for i in indexes if seqs[i] <= hwm]
    out.appending += [i for i in indexes if seqs[i] > hwm]
    if not old:
        return
    assert producer is not None
    last = [i for i in old if producer.low <= seqs[i] <= producer.high]
    known: list[bytes] = [UNKNOWN_ID] * len(last)
    if last and len(last) == producer.count and producer.first and producer.last:
        known = _between(log, producer.first, producer.last, producer.count, len(last))
    replies = dict.fromkeys(old, UNKNOWN_ID)
    replies.update(zip(last, known, strict=True))
    out.replies.update(replies)


def _keyed(
    identity: KeyedIdentity, indexes: list[int], found: Remembered, now: float, out: Plan
) -> None:
    first_of: dict[bytes, int] = {}
    for i in indexes:
        key = identity.keys[i]
        if key is None:
            out.appending.append(i)
            continue
        if key in first_of:
            out.replies[i] = first_of[key]
            continue
        stored = found.lookup(b"k" + key, now)
        if stored is None:
            first_of[key] = i
            out.appending.append(i)
        else:
            out.replies[i] = stored


def _between(log: PartitionLog, first: Id, last: Id, count: int, wanted: int) -> list[bytes]:
    """The ids of an append's ``count`` entries from ``first`` to ``last`` still in the
    log; those trimmed since (the oldest) as :data:`UNKNOWN_ID`; fitted to ``wanted``."""
    start = log.after((first[0], first[1] - 1) if first[1] else (first[0] - 1, 2**64 - 1))
    there = [show_id(x) for x in start if x <= last][:count]
    ids = [UNKNOWN_ID] * (count - len(there)) + there
    return (ids + [UNKNOWN_ID] * wanted)[:wanted]


def settle(
    identity: Identity,
    members: dict[Any, list[int]],
    done: Plan,
    ids: Sequence[bytes | None],
    parsed: Sequence[Id | None],
    state: Callable[[Any], Remembered],
    now: float,
    window: Window,
) -> None:
    """After the append: remember what it took under ``identity`` (``ids``, ``parsed``:
    each entry's id, None for a duplicate) and count each partition's duplicates."""
    for partition, indexes in members.items():
        found = state(partition)
        found.duplicates += sum(1 for i in indexes if i in done.replies)
        new = [i for i in indexes if i not in done.replies]
        if isinstance(identity, CallIdentity):
            if new:
                first, last = parsed[new[0]], parsed[new[-1]]
                found.remember(done.calls[partition], (first, last, len(new)), now, window)
        elif isinstance(identity, SequencedIdentity):
            _settle_producer(identity, new, parsed, found, now, window)
        else:
            for i in new:
                key = identity.keys[i]
                if key is not None:
                    found.remember(b"k" + key, ids[i], now, window)


def _settle_producer(
    identity: SequencedIdentity,
    new: list[int],
    parsed: Sequence[Id | None],
    found: Remembered,
    now: float,
    window: Window,
) -> None:
    producer = found.producer(identity.producer, now)
    expires = now + window.ms / 1000
    if not new:
        if producer is not None:
            producer.expires = expires
        return
    if producer is None:
        found.producers = {n: p for n, p in found.producers.items() if p.expires > now}
        producer = found.producers[identity.producer] = ProducerState(-1, expires)
    seqs = identity.seqs  # rising within the partition: new[-1] is the highest
    producer.hwm = producer.high = seqs[new[-1]]
    producer.low = seqs[new[0]]
    producer.expires = expires
    producer.first, producer.last = parsed[new[0]], parsed[new[-1]]
    producer.count = len(new)
