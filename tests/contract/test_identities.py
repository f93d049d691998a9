"""Log: appends with identities (runnel.store.identity). A call, a numbered record or a
keyed record a partition already took is not appended again: the reply gives its
original id, and the partition's duplicates count says how many were dropped. The state
is bounded: a window of time and of keys, and nothing stays once a partition is idle.
Optional: a store whose ``append`` takes no identity skips these tests.
"""

from __future__ import annotations

import pytest

from runnel.exceptions import IdentityError, PartitionFull, PartlySent
from runnel.store import (
    NEW,
    Backend,
    CallIdentity,
    KeyedIdentity,
    LogAdmin,
    PartitionId,
    SequencedIdentity,
    Window,
)
from tests.contract.support import CONSUMER, GROUP, LONG, SHORT, Time, ids_of, part

UNKNOWN = b"0-0"


def entries(app: str, numbers: list[int], partitions: int = 2) -> list[tuple[PartitionId, dict]]:
    """Entry ``{n: N}`` for each number, to partition ``N % partitions``."""
    return [(part(app, n % partitions), {b"n": str(n).encode()}) for n in numbers]


async def stored(admin: LogAdmin, p: PartitionId) -> list[tuple[bytes, bytes]]:
    """(id, n) of every entry of ``p``, oldest first."""
    return [(xid, fields[b"n"]) for xid, fields in await admin.scan(p, None, 10_000)]


async def test_a_retried_call_returns_the_original_ids_and_appends_nothing(
    identities: Backend, app: str, admin: LogAdmin
) -> None:
    p0, p1 = part(app, 0), part(app, 1)
    call = CallIdentity("producer-a", 7)
    first = await identities.log.append(entries(app, list(range(6))), identity=call)
    assert (len(first), first.duplicates) == (6, 0)
    again = await identities.log.append(entries(app, list(range(6))), identity=call)
    assert again == first and again.duplicates == 6
    assert await admin.lengths([p0, p1]) == {p0: 3, p1: 3}
    assert await admin.duplicates([p0, p1]) == {p0: 3, p1: 3}
    # Another call (or another producer's call of the same number) is appended.
    other = await identities.log.append(entries(app, [6]), identity=CallIdentity("producer-a", 8))
    elsewhere = await identities.log.append(entries(app, [8]), identity=CallIdentity("b", 7))
    assert other.duplicates == elsewhere.duplicates == 0
    assert await admin.lengths([p0, p1]) == {p0: 5, p1: 3}
    assert await admin.remembered([p0, p1]) == {p0: (3, 0), p1: (1, 0)}
    # A first try (the caller's word that it is new) is only remembered, not looked
    # up; a try again is looked up and recognised.
    first = CallIdentity("producer-c", 1, first_try=True)
    ids = await identities.log.append(entries(app, [10, 11]), identity=first)
    again = await identities.log.append(entries(app, [10, 11]), identity=first.retried())
    assert again == ids and again.duplicates == 2


async def test_a_retried_chunk_skips_what_is_in_and_appends_the_rest_in_order(
    identities: Backend, app: str, admin: LogAdmin
) -> None:
    p0, p1 = part(app, 0), part(app, 1)
    numbers = list(range(1, 7))
    first = await identities.log.append(
        entries(app, numbers), identity=SequencedIdentity("file-1", numbers)
    )
    # Run again with more: what is in is skipped (its original ids), the rest appended.
    more = list(range(1, 11))
    again = await identities.log.append(
        entries(app, more), identity=SequencedIdentity("file-1", more)
    )
    assert again.duplicates == 6
    assert again[:6] == first
    assert [n for _, n in await stored(admin, p0)] == [b"2", b"4", b"6", b"8", b"10"]
    assert [n for _, n in await stored(admin, p1)] == [b"1", b"3", b"5", b"7", b"9"]
    assert sorted(ids_of(await admin.scan(p0, None, 100))) == sorted(again[1::2])
    # A chunk older than the producer's last append to a partition: dropped, its ids no
    # longer kept; the last one's are.
    older = await identities.log.append(
        entries(app, numbers), identity=SequencedIdentity("file-1", numbers)
    )
    assert older.duplicates == 6 and set(older) == {UNKNOWN}
    last = await identities.log.append(
        entries(app, more[6:]), identity=SequencedIdentity("file-1", more[6:])
    )
    assert last == again[6:] and last.duplicates == 4
    assert await admin.lengths([p0, p1]) == {p0: 5, p1: 5}
    assert await admin.duplicates([p0, p1]) == {p0: 8, p1: 8}
    assert await admin.remembered([p0, p1]) == {p0: (0, 1), p1: (0, 1)}
    # Another producer's numbers are its own.
    theirs = await identities.log.append(entries(app, [1]), identity=SequencedIdentity("f2", [1]))
    assert theirs.duplicates == 0


async def test_a_forgotten_producer_starts_again(
    identities: Backend, app: str, admin: LogAdmin
) -> None:
    p0, p1 = part(app, 0), part(app, 1)
    await identities.log.append(entries(app, [1, 2]), identity=SequencedIdentity("job", [1, 2]))
    await identities.log.forget_producer([p0, p1], "job")
    again = await identities.log.append(
        entries(app, [1, 2]), identity=SequencedIdentity("job", [1, 2])
    )
    assert again.duplicates == 0
    assert await admin.lengths([p0, p1]) == {p0: 2, p1: 2}


async def test_a_record_sent_twice_by_key_is_appended_once(
    identities: Backend, app: str, admin: LogAdmin
) -> None:
    p0, p1 = part(app, 0), part(app, 1)
    keys = [b"order-1", b"order-2", b"order-1", None, b"order-3"]
    # Entries 0 and 2 have one key and go to one partition: the later is the duplicate.
    sent = [(p0, {b"n": b"0"}), (p1, {b"n": b"1"}), (p0, {b"n": b"2"})]
    sent += [(p0, {b"n": b"3"}), (p1, {b"n": b"4"})]
    first = await identities.log.append(sent, identity=KeyedIdentity(keys))
    assert first.duplicates == 1 and first[2] == first[0]
    assert [n for _, n in await stored(admin, p0)] == [b"0", b"3"]
    # Again: every keyed entry is in (its original id); the one without a key is not.
    again = await identities.log.append(sent, identity=KeyedIdentity(keys))
    assert again.duplicates == 4
    assert [again[i] for i in (0, 1, 2, 4)] == [first[i] for i in (0, 1, 2, 4)]
    assert again[3] != first[3]
    assert [n for _, n in await stored(admin, p0)] == [b"0", b"3", b"3"]
    assert await admin.duplicates([p0, p1]) == {p0: 3, p1: 2}
    assert await admin.remembered([p0, p1]) == {p0: (1, 0), p1: (2, 0)}


async def test_keys_and_calls_are_forgotten_after_the_window(
    identities: Backend, app: str, admin: LogAdmin, store_time: Time
) -> None:
    p = part(app, 0)
    window = Window(seconds=SHORT / 1000)
    record = [(p, {b"n": b"1"})]
    key, call = KeyedIdentity([b"once"]), CallIdentity("p", 1)
    await identities.log.append(record, identity=key, window=window)
    await identities.log.append(record, identity=call, window=window)
    assert (await identities.log.append(record, identity=key, window=window)).duplicates == 1
    assert (await identities.log.append(record, identity=call, window=window)).duplicates == 1
    assert (await admin.lengths([p]))[p] == 2

    async def forgotten() -> bool:
        return (await admin.remembered([p]))[p] == (0, 0)

    await store_time.until(forgotten, "the window's keys forgotten")
    assert (await identities.log.append(record, identity=key, window=window)).duplicates == 0
    assert (await identities.log.append(record, identity=call, window=window)).duplicates == 0
    assert (await admin.lengths([p]))[p] == 4


async def test_idle_producers_are_forgotten_after_the_window(
    identities: Backend, app: str, admin: LogAdmin, store_time: Time
) -> None:
    p = part(app, 0)
    window = Window(seconds=SHORT / 1000)
    record = [(p, {b"n": b"1"})]
    await identities.log.append(record, identity=SequencedIdentity("s", [5]), window=window)
    again = await identities.log.append(record, identity=SequencedIdentity("s", [5]), window=window)
    assert again.duplicates == 1
    assert (await admin.remembered([p]))[p] == (0, 1)

    async def forgotten() -> bool:
        return (await admin.remembered([p]))[p] == (0, 0)

    await store_time.until(forgotten, "the producer forgotten")
    late = await identities.log.append(record, identity=SequencedIdentity("s", [5]), window=window)
    assert late.duplicates == 0
    assert (await admin.duplicates([p]))[p] == 1  # the count stays


async def test_the_count_of_keys_is_bounded_oldest_forgotten_first(
    identities: Backend, app: str, admin: LogAdmin
) -> None:
    """Two generations of keys / 2: a full one starts a new one, the older forgotten."""
    p = part(app, 0)
    window = Window(keys=4)

    async def send(key: bytes) -> int:
        got = await identities.log.append(
            [(p, {b"k": key})], identity=KeyedIdentity([key]), window=window
        )
        remembered, _ = (await admin.remembered([p]))[p]
        assert remembered <= window.keys
        return got.duplicates

    for key in (b"a", b"b", b"c", b"d", b"e"):
        assert await send(key) == 0
    assert await send(b"d") == 1  # among the last keys / 2 and more: still known
    assert await send(b"a") == 0  # two generations ago: forgotten
    for n in range(40):
        await send(b"x%d" % n)
    many = [b"y%d" % n for n in range(9)]  # one call of more than a generation holds
    got = await identities.log.append(
        [(p, {b"k": key}) for key in many], identity=KeyedIdentity(many), window=window
    )
    assert got.duplicates == 0
    assert 0 < (await admin.remembered([p]))[p][0] <= window.keys
    assert await send(b"y8") == 1
    assert await send(b"y0") == 0


async def test_a_partly_refused_call_retried_appends_each_entry_once(
    identities: Backend, app: str, admin: LogAdmin
) -> None:
    """Partition 0 is full of entries a group has not acknowledged: the call is refused
    there (on a Redis Cluster the other partitions' parts are in, and the error says
    which). Once there is room, the same call again completes it, each entry once."""
    p0, p1, size = part(app, 0), part(app, 1), 20
    await identities.log.ensure_group([p0], GROUP)
    coordination = identities.coordination(app, "orders", GROUP)
    await coordination.acquire("owner", [p0], LONG)
    await identities.log.append([(p0, {b"n": b"old"})] * size, maxlen=size)
    call = CallIdentity("prod", 1)
    sent = entries(app, list(range(6)))
    with pytest.raises(PartlySent) as refused:
        await identities.log.append(sent, maxlen=size, identity=call)
    assert isinstance(refused.value, PartitionFull)
    in_before = [xid for xid in refused.value.ids if xid is not None]
    got = await coordination.read("owner", CONSUMER, {p0: NEW}, size)
    await coordination.ack("owner", {p0: [xid for _, es in got.entries for xid, _ in es]})
    done = await identities.log.append(sent, maxlen=size, identity=call)
    assert done.duplicates == len(in_before)
    assert set(in_before) <= set(done)
    lengths = await admin.lengths([p0, p1])
    assert lengths[p1] == 3 and 3 <= lengths[p0] <= size + 1
    assert [n for _, n in await stored(admin, p1)] == [b"1", b"3", b"5"]
    assert [n for _, n in await stored(admin, p0)][-3:] == [b"0", b"2", b"4"]
    # A retry whose entries are all in needs no room: it returns their ids, full or not.
    await identities.log.append([(p0, {b"n": b"more"})] * (size - 3), maxlen=size)
    assert await identities.log.append(sent, maxlen=size, identity=call) == done


async def test_identities_are_checked_before_anything_is_sent(
    identities: Backend, app: str, admin: LogAdmin
) -> None:
    p0, p1 = part(app, 0), part(app, 1)
    two = entries(app, [0, 2])  # both to partition 0
    bad = [
        ({"ids": ["5-1", "5-2"]}, CallIdentity("p", 1)),
        ({}, SequencedIdentity("p", [1])),
        ({}, SequencedIdentity("p", [2, 2])),
        ({}, SequencedIdentity("p", [1, -1])),
        ({}, SequencedIdentity("", [1, 2])),
        ({}, KeyedIdentity([b"a"])),
        ({}, KeyedIdentity(["text", b"b"])),  # type: ignore[list-item]
    ]
    for options, identity in bad:
        with pytest.raises(IdentityError):
            await identities.log.append(two, identity=identity, **options)
    assert await admin.lengths([p0, p1]) == {p0: 0, p1: 0}
