"""Identities on appends, the parts without a store: the checks before anything is sent,
the window's bounds, a producer's calls (a new producer after a fork), and a store
written before identities: its plain appends work, one with an identity is refused
clearly, and a send falls back to a plain append (tests/contract holds the stores)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from runnel import App, Record
from runnel.exceptions import IdentityError, Misconfigured
from runnel.memory.log import MemoryLog
from runnel.store import Appended, CallIdentity, KeyedIdentity, PartitionId, SequencedIdentity
from runnel.store import identity as identities
from runnel.store.identity import Producer, Window, checked, covers_all, key_bytes
from runnel.store.synclog import SyncLog
from runnel.testing import memory_url


class Ping(Record):
    key: str
    n: int


P, Q = PartitionId("a", "s", 0), PartitionId("a", "s", 1)


def to(*partitions: PartitionId) -> list[tuple[PartitionId, dict[bytes, bytes]]]:
    return [(p, {b"n": b"1"}) for p in partitions]


def test_identities_are_checked() -> None:
    assert checked(SequencedIdentity("p", [3, 1, 4]), to(P, Q, P)) is not None
    with pytest.raises(IdentityError, match="not above 3"):
        checked(SequencedIdentity("p", [3, 1, 2]), to(P, Q, P))
    with pytest.raises(IdentityError, match="2\\*\\*53"):
        checked(SequencedIdentity("p", [2**53]), to(P))
    with pytest.raises(IdentityError, match="explicit entry ids"):
        checked(CallIdentity("p", 1), to(P), ["1-1"])
    with pytest.raises(IdentityError, match="2 keys for 1 entries"):
        checked(KeyedIdentity([b"a", b"b"]), to(P))
    with pytest.raises(IdentityError, match="producer"):
        checked(CallIdentity("", 1), to(P))


def test_a_keyed_append_with_an_entry_without_a_key_is_not_sent_again() -> None:
    assert covers_all(CallIdentity("p", 1)) and covers_all(SequencedIdentity("p", [1]))
    assert covers_all(KeyedIdentity([b"a"]))
    assert not covers_all(KeyedIdentity([b"a", None])) and not covers_all(None)
    assert [key_bytes(v) for v in ("é", b"b", 7, None)] == ["é".encode(), b"b", b"7", None]


def test_a_subset_keeps_each_entrys_identity() -> None:
    assert SequencedIdentity("p", [1, 2, 3]).subset([0, 2]) == SequencedIdentity("p", [1, 3])
    assert KeyedIdentity([b"a", None, b"c"]).subset([2]) == KeyedIdentity([b"c"])
    call = CallIdentity("p", 9)
    assert call.subset([1]) is call


def test_the_window_is_bounded() -> None:
    assert (Window().seconds, Window().keys, Window().half_keys) == (3600.0, 10_000, 5_000)
    for bad in ({"seconds": 0}, {"keys": 1}, {"keys": True}):
        with pytest.raises(IdentityError):
            Window(**bad)  # type: ignore[arg-type]
    with pytest.raises(Misconfigured, match="idempotence"):
        App("w", redis_url=memory_url()).stream(
            "s", record=Ping, partition_by="key", idempotence_keys=1
        )
    with pytest.raises(Misconfigured, match="idempotency_key='nope' is not a field"):
        App("w", redis_url=memory_url()).stream(
            "s", record=Ping, partition_by="key", idempotency_key="nope"
        )


def test_a_producer_numbers_its_calls_and_is_new_after_a_fork() -> None:
    producer = Producer()
    first, second = producer.call(), producer.call()
    assert first.producer == second.producer and second.number == first.number + 1
    # A call's first try need not be looked up; any later one (or part of it) is.
    assert first.first_try and not first.retried().first_try
    assert first.retried() == CallIdentity(first.producer, first.number)
    assert not first.subset([0]).first_try
    identities._forked()  # what os.register_at_fork runs in a child
    child = producer.call()
    assert child.producer != first.producer and child.number == 1
    assert Producer().call().producer != child.producer


class OldLog(MemoryLog):
    """A store's log written before identities: ``append`` takes no identity."""

    async def append(  # type: ignore[override]
        self,
        entries: Sequence[tuple[PartitionId, Any]],
        maxlen: int | None = None,
        ids: Sequence[str] | None = None,
        drop_oldest: bool = False,
    ) -> list[bytes]:
        return list(await super().append(entries, maxlen, ids, drop_oldest))


async def test_a_store_without_identities_refuses_them_clearly() -> None:
    app = App("old", redis_url=memory_url())
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    store = app.store
    old = OldLog(store.log.server)  # type: ignore[attr-defined]
    store.log = old
    assert not OldLog.identities and MemoryLog.identities
    plain = await old.append([(P, {b"n": b"1"})])
    assert isinstance(plain, Appended) and plain.duplicates == 0
    with pytest.raises(Misconfigured, match="OldLog cannot recognise an append"):
        await old.append([(P, {b"n": b"1"})], identity=CallIdentity("p", 1))
    # A send (idempotent_sends on) appends as before; keys cannot be honoured: refused.
    assert len(await pings.send(Ping(key="a", n=1))) == 1
    with pytest.raises(Misconfigured, match="cannot recognise"):
        await pings.send(Ping(key="a", n=1), keys=["order-1"])


def test_a_sync_log_without_identities_refuses_them_clearly() -> None:
    class OldSyncLog(SyncLog):
        url = "old://"

        def extents(self, partitions: Any) -> Any:
            return []

        def read(self, partition: Any, first: str, last: str, count: int) -> Any:
            return iter(())

        def nth_ids(self, ranges: Any) -> Any:
            return []

        def append(  # type: ignore[override]
            self, entries: Any, maxlen: int | None = None, drop_oldest: bool = False
        ) -> None:
            return None

        def close(self) -> None:
            pass

    log = OldSyncLog()
    assert not OldSyncLog.identities
    assert log.append([(P, {b"n": b"1"})]) == Appended()
    with pytest.raises(Misconfigured, match="OldSyncLog cannot recognise"):
        log.append([(P, {b"n": b"1"})], identity=SequencedIdentity("w", [1]))
