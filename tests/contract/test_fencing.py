"""Coordination, fenced: reads and acknowledgements happen only on partitions whose lock
the caller holds, so an owner that lost a lock can neither read nor acknowledge there."""

from __future__ import annotations

import pytest

from runnel.exceptions import TransportError
from runnel.store import (
    NEW,
    PENDING,
    Backend,
    Coordination,
    LogAdmin,
    PartitionId,
    Position,
)
from tests.contract.support import (
    CONSUMER,
    GROUP,
    LONG,
    MEDIUM,
    STREAM,
    Time,
    fill,
    id_key,
    ids_of,
    numbers,
    part,
    pending,
)


def coordination(backend: Backend, app: str) -> Coordination:
    return backend.coordination(app, STREAM, GROUP)


async def with_entries(backend: Backend, app: str, n: int) -> list[PartitionId]:
    """``n`` partitions with the group and 3 entries each."""
    partitions = [part(app, p) for p in range(n)]
    await backend.log.ensure_group(partitions, GROUP)
    for p in partitions:
        await fill(backend.log, p, 3)
    return partitions


async def nothing_delivered(c: Coordination, p: PartitionId) -> list[bytes]:
    """The pending ids of a partition nobody holds, looked at by a passer-by."""
    assert await c.acquire("passer-by", [p], LONG) == {p}
    try:
        return await pending(c, "passer-by", p)
    finally:
        await c.release("passer-by", [p])


@pytest.mark.parametrize("count", [3, 100])
async def test_fenced_read_and_ack_only_on_partitions_we_hold(
    backend: Backend, app: str, count: int
) -> None:
    c = coordination(backend, app)
    k0, k1, k2 = await with_entries(backend, app, 3)
    assert await c.acquire("a", [k0], LONG) == {k0}
    assert await c.acquire("b", [k1], LONG) == {k1}  # partition 2: nobody's

    result = await c.read("a", CONSUMER, {k0: NEW, k1: NEW, k2: NEW}, count)
    assert result.lost == [k1, k2]
    assert [key for key, _ in result.entries] == [k0]
    assert numbers(result.entries[0][1]) == [b"0", b"1", b"2"]
    ids0 = ids_of(result.entries[0][1])
    assert await pending(c, "a", k0) == ids0
    assert await pending(c, "b", k1) == []  # nothing was delivered
    assert await nothing_delivered(c, k2) == []

    # Nothing held at all: nothing read.
    result = await c.read("a", CONSUMER, {k1: NEW}, count)
    assert (result.entries, result.lost) == ([], [k1])
    assert await pending(c, "b", k1) == []

    result = await c.read("b", CONSUMER, {k1: NEW}, count)
    assert result.lost == []
    ids1 = ids_of(result.entries[0][1])
    assert len(ids1) == 3

    # Acknowledging on someone else's partition: refused, the entries stay pending.
    assert await c.ack("a", {k1: ids1}) == [k1]
    assert await pending(c, "b", k1) == ids1
    # Several partitions at once: ours are acknowledged, the other is refused.
    assert await c.ack("a", {k0: ids0[:1], k1: ids1}) == [k1]
    assert await pending(c, "a", k0) == ids0[1:]
    assert await pending(c, "b", k1) == ids1
    assert await c.ack("a", {k0: ids0[1:]}) == []
    assert await pending(c, "a", k0) == []
    # The holder can acknowledge.
    assert await c.ack("b", {k1: ids1}) == []
    assert await pending(c, "b", k1) == []


async def test_fenced_ack_of_many_ids_goes_in_chunks(backend: Backend, app: str) -> None:
    c = coordination(backend, app)
    k0, k1 = part(app, 0), part(app, 1)
    await backend.log.ensure_group([k0, k1], GROUP)
    for key in (k0, k1):
        await fill(backend.log, key, 2500)
    assert await c.acquire("a", [k0], LONG) == {k0}
    assert await c.acquire("b", [k1], LONG) == {k1}
    ids = {}
    for owner, key in (("a", k0), ("b", k1)):
        result = await c.read(owner, CONSUMER, {key: NEW}, 5000)
        ids[key] = ids_of(result.entries[0][1])
        assert len(ids[key]) == 2500

    assert await c.ack("a", {k1: ids[k1]}) == [k1]
    assert len(await pending(c, "b", k1)) == 2500
    assert await c.ack("a", {k0: ids[k0], k1: ids[k1]}) == [k1]
    assert await pending(c, "a", k0) == []
    assert len(await pending(c, "b", k1)) == 2500
    assert await c.ack("b", {k1: ids[k1]}) == []
    assert await pending(c, "b", k1) == []


async def test_acknowledging_thousands_of_ids_at_once(backend: Backend, app: str) -> None:
    """More ids for one partition than a store may take in one command, next to a
    partition with a few: all acknowledged."""
    c = coordination(backend, app)
    k0, k1 = part(app, 0), part(app, 1)
    await backend.log.ensure_group([k0, k1], GROUP)
    await fill(backend.log, k0, 2500)
    await backend.log.append([(k1, {b"n": b"x"}), (k1, {b"n": b"y"})])
    assert await c.acquire("a", [k0, k1], LONG) == {k0, k1}
    result = await c.read("a", CONSUMER, {k0: NEW, k1: NEW}, 5000)
    ids = {key: ids_of(entries) for key, entries in result.entries}
    assert [len(ids[k0]), len(ids[k1])] == [2500, 2]
    assert await c.ack("a", ids) == []
    assert await pending(c, "a", k0) == []
    assert await pending(c, "a", k1) == []


async def test_an_old_owner_cannot_ack_after_its_lock_expired_and_was_taken(
    backend: Backend, app: str, store_time: Time
) -> None:
    c = coordination(backend, app)
    [k0] = await with_entries(backend, app, 1)
    assert await c.acquire("a", [k0], MEDIUM) == {k0}
    result = await c.read("a", CONSUMER, {k0: NEW}, 10)
    ids = ids_of(result.entries[0][1])
    assert len(ids) == 3

    async def expired() -> bool:
        return (await c.lock_owners([k0]))[k0] is None

    await store_time.until(expired, "a's lock expired")
    assert await c.acquire("b", [k0], LONG) == {k0}

    assert await c.ack("a", {k0: ids}) == [k0]
    assert await pending(c, "b", k0) == ids
    assert (await c.read("a", CONSUMER, {k0: PENDING}, 10)).lost == [k0]
    assert await c.beat("a", [k0], LONG) == set()
    assert await c.lock_owners([k0]) == {k0: "b"}

    # The new owner reads the unacknowledged entries again and acknowledges them.
    result = await c.read("b", CONSUMER, {k0: PENDING}, 10)
    assert ids_of(result.entries[0][1]) == ids
    assert await c.ack("b", {k0: ids}) == []
    assert await pending(c, "b", k0) == []


async def test_reads_and_acks_only_on_partitions_whose_lock_we_hold(
    backend: Backend, app: str, admin: LogAdmin, store_time: Time
) -> None:
    p0, p1, p2 = part(app, 0), part(app, 1), part(app, 2)
    c = coordination(backend, app)
    await backend.log.ensure_group([p0, p1, p2], GROUP)
    for p in (p0, p1, p2):
        await fill(backend.log, p, 2)
    assert await c.acquire("a", [p0], MEDIUM) == {p0}
    assert await c.acquire("b", [p0, p1], MEDIUM) == {p1}

    result = await c.read("a", CONSUMER, {p0: NEW, p1: NEW, p2: NEW}, 10)
    assert result.lost == [p1, p2]
    assert [p for p, _ in result.entries] == [p0]
    assert await admin.backlog([p1, p2], GROUP) == {p1: (2, 0), p2: (2, 0)}
    ids = ids_of(result.entries[0][1])

    # a's lock expires and b takes it: a can no longer acknowledge or read there.
    async def both_expired() -> bool:
        return await c.lock_owners([p0, p1]) == {p0: None, p1: None}

    await store_time.until(both_expired, "both locks expired")
    assert await c.acquire("b", [p0], LONG) == {p0}
    assert await c.ack("a", {p0: ids}) == [p0]
    assert await admin.backlog([p0], GROUP) == {p0: (0, 2)}
    assert (await c.read("a", CONSUMER, {p0: PENDING}, 10)).lost == [p0]
    # The new owner reads the unacknowledged entries again and acknowledges them.
    mine = await c.read("b", CONSUMER, {p0: PENDING}, 10)
    assert ids_of(mine.entries[0][1]) == ids
    assert await c.ack("b", {p0: ids}) == []
    assert await admin.backlog([p0], GROUP) == {p0: (0, 0)}


async def test_entries_are_delivered_once_per_group_then_reread_until_acknowledged(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    p = part(app, 0)
    c = coordination(backend, app)
    await backend.log.ensure_group([p], GROUP)
    ids = await fill(backend.log, p, 5)
    assert ids == sorted(ids, key=id_key)
    assert await c.acquire("a", [p], LONG) == {p}

    first = await c.read("a", CONSUMER, {p: NEW}, 3)
    assert [(q, numbers(e)) for q, e in first.entries] == [(p, [b"0", b"1", b"2"])]
    second = await c.read("a", CONSUMER, {p: NEW}, 10)
    assert numbers(second.entries[0][1]) == [b"3", b"4"]
    # Nothing new: no entries for the partition at all.
    assert (await c.read("a", CONSUMER, {p: NEW}, 10)).entries == []
    assert await backend.log.last_delivered([p], GROUP) == {p: ids[-1]}
    assert await admin.backlog([p], GROUP) == {p: (0, 5)}

    # Unacknowledged entries are read again from the start, and after a given id.
    again = await c.read("a", CONSUMER, {p: PENDING}, 10)
    assert ids_of(again.entries[0][1]) == ids
    after = await c.read("a", CONSUMER, {p: Position.pending_after(ids[2])}, 10)
    assert ids_of(after.entries[0][1]) == ids[3:]

    assert await c.ack("a", {p: ids[:4]}) == []
    assert await admin.first_pending(p, GROUP) == ids[4]
    assert await admin.backlog([p], GROUP) == {p: (0, 1)}
    # History drained: an empty list, so the reader knows to read new entries next.
    drained = await c.read("a", CONSUMER, {p: Position.pending_after(ids[4])}, 10)
    assert drained.entries == [(p, [])]


async def test_read_leaves_other_locks_as_they_were(backend: Backend, app: str) -> None:
    """Reading partitions whose locks are not ours leaves them as they were: a lock held
    by another keeps its holder, a free one stays free, and neither partition has
    anything delivered."""
    c = coordination(backend, app)
    k0, k1, k2 = await with_entries(backend, app, 3)
    assert await c.acquire("a", [k0], LONG) == {k0}
    assert await c.acquire("b", [k1], LONG) == {k1}
    for others in ({k1: NEW}, {k2: NEW}, {k1: NEW, k2: NEW}):
        result = await c.read("a", CONSUMER, {k0: PENDING, **others}, 10)
        assert result.lost == list(others)
        assert [key for key, _ in result.entries] == [k0]
    assert await c.lock_owners([k1, k2]) == {k1: "b", k2: None}
    assert await pending(c, "b", k1) == []
    assert await nothing_delivered(c, k2) == []


async def test_reading_without_a_group_is_an_error(backend: Backend, app: str) -> None:
    """A partition without its consumer group: the read raises (the fetcher retries,
    from the pending entries), and reading works once the group is there. What the failed
    read delivered from another partition (a store reading each partition on its own
    may) is pending, so it is read again: nothing is lost or read twice."""
    p, q = part(app, 0), part(app, 1)
    c = coordination(backend, app)
    await backend.log.ensure_group([p], GROUP)
    p_ids = await fill(backend.log, p, 2)
    q_ids = await fill(backend.log, q, 2)
    await c.acquire("a", [p, q], LONG)
    with pytest.raises(TransportError, match="group"):
        await c.read("a", CONSUMER, {p: NEW, q: NEW}, 10)
    again = await pending(c, "a", p)
    await backend.log.ensure_group([q], GROUP)
    result = await c.read("a", CONSUMER, {p: NEW, q: NEW}, 10)
    new = {key: ids_of(entries) for key, entries in result.entries}
    assert again + new.get(p, []) == p_ids
    assert new[q] == q_ids


async def test_read_and_ack_together_only_on_partitions_we_hold(backend: Backend, app: str) -> None:
    """One fenced step that acknowledges and reads: ours are acknowledged and read; a
    partition another executor holds, or nobody holds, is neither acknowledged nor read
    (its entries stay pending, nothing is delivered), and is reported lost."""
    c = coordination(backend, app)
    k0, k1, k2 = await with_entries(backend, app, 3)
    assert await c.acquire("a", [k0], LONG) == {k0}
    assert await c.acquire("b", [k1], LONG) == {k1}
    first = await c.read("a", CONSUMER, {k0: NEW}, 2)
    ids0 = ids_of(first.entries[0][1])
    mine = await c.read("b", CONSUMER, {k1: NEW}, 10)
    ids1 = ids_of(mine.entries[0][1])

    result, unacked = await c.read_and_ack(
        "a", CONSUMER, {k0: NEW, k1: NEW, k2: NEW}, 10, {k0: ids0, k1: ids1}
    )
    assert unacked == [k1]
    assert result.lost == [k1, k2]
    assert [(key, numbers(entries)) for key, entries in result.entries] == [(k0, [b"2"])]
    assert await pending(c, "a", k0) == ids_of(result.entries[0][1])  # ids0 acknowledged
    assert await pending(c, "b", k1) == ids1
    assert await nothing_delivered(c, k2) == []

    # Acknowledging only (nothing to read), ours and someone else's.
    result, unacked = await c.read_and_ack(
        "a", CONSUMER, {}, 10, {k0: ids_of(result.entries[0][1]), k1: ids1}
    )
    assert (result.entries, result.lost, unacked) == ([], [], [k1])
    assert await pending(c, "a", k0) == []
    assert await pending(c, "b", k1) == ids1


async def test_a_stale_owner_can_neither_read_nor_ack_in_one_step(
    backend: Backend, app: str, store_time: Time
) -> None:
    """The owner whose lock expired and was taken: its combined acknowledgement and read
    does nothing at all; the new owner finds every entry still pending."""
    c = coordination(backend, app)
    [k0] = await with_entries(backend, app, 1)
    assert await c.acquire("a", [k0], MEDIUM) == {k0}
    ids = ids_of((await c.read("a", CONSUMER, {k0: NEW}, 2)).entries[0][1])

    async def expired() -> bool:
        return (await c.lock_owners([k0]))[k0] is None

    await store_time.until(expired, "a's lock expired")
    assert await c.acquire("b", [k0], LONG) == {k0}

    result, unacked = await c.read_and_ack("a", CONSUMER, {k0: NEW}, 10, {k0: ids})
    assert (result.entries, result.lost, unacked) == ([], [k0], [k0])
    assert await pending(c, "b", k0) == ids  # not acknowledged, the third not delivered
    again = await c.read("b", CONSUMER, {k0: PENDING}, 10)
    assert ids_of(again.entries[0][1]) == ids
    assert numbers((await c.read("b", CONSUMER, {k0: NEW}, 10)).entries[0][1]) == [b"2"]
