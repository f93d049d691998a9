"""Log: appending to partitions, consumer groups, waiting for new entries, lost counts.

Holding a partition to its size (``maxlen``) is in test_log_size.py; reading through a
group is fenced by locks, so it is in test_fencing.py.
"""

from __future__ import annotations

import asyncio

import pytest

from runnel.exceptions import EntryIdError, PartlySent
from runnel.store import NEW, PENDING, Backend, LogAdmin
from tests.contract.support import (
    CONSUMER,
    GROUP,
    HANG_GUARD,
    LONG,
    STREAM,
    fill,
    id_key,
    ids_of,
    part,
    pending,
)


async def test_append_returns_rising_ids_per_partition(backend: Backend, app: str) -> None:
    p, q = part(app, 0), part(app, 1)
    ids = await backend.log.append(
        [(p, {b"n": b"0"}), (q, {b"n": b"1"}), (p, {b"n": b"2"}), (p, {b"n": b"3"})]
    )
    assert len(ids) == 4
    mine = [ids[0], ids[2], ids[3]]
    assert mine == sorted(mine, key=id_key) and len(set(mine)) == 3
    more = await fill(backend.log, p, 2)
    assert id_key(more[0]) > id_key(mine[-1])
    assert await backend.log.append([]) == []


async def test_explicit_ids_all_or_none(backend: Backend, app: str, admin: LogAdmin) -> None:
    """``send(stream_ids=...)``: ids kept as given; one too low appends nothing."""
    p0, p1 = part(app, 0), part(app, 1)
    added = await backend.log.append([(p0, {b"n": b"1"}), (p0, {b"n": b"2"})], ids=["5-1", "5-3"])
    assert added == [b"5-1", b"5-3"]
    with pytest.raises((EntryIdError, PartlySent)) as refused:
        await backend.log.append([(p1, {b"n": b"3"}), (p0, {b"n": b"4"})], ids=["9-0", "5-3"])
    # A store that appends each partition's part on its own (Redis Cluster) says which
    # are in; the refused partition is left as it was.
    in_p1 = int(isinstance(refused.value, PartlySent) and refused.value.ids[0] is not None)
    assert isinstance(refused.value, EntryIdError) or refused.value.ids[1] is None
    assert await admin.lengths([p0, p1]) == {p0: 2, p1: in_p1}
    # "*" is the store's pick, after the last id of the partition.
    [picked] = await backend.log.append([(p0, {b"n": b"5"})], ids=["*"])
    assert id_key(picked) > (5, 3)


async def test_values_are_stored_as_bytes(backend: Backend, app: str, admin: LogAdmin) -> None:
    p = part(app, 0)
    await backend.log.append([(p, {"data": "text", b"n": 3, b"x": 1.5})])
    [(_, fields)] = await admin.scan(p, None, 10)
    assert fields == {b"data": b"text", b"n": b"3", b"x": b"1.5"}


async def test_ensure_group_is_idempotent_and_keeps_the_group_where_it_is(
    backend: Backend, app: str
) -> None:
    p = part(app, 0)
    c = backend.coordination(app, STREAM, GROUP)
    await backend.log.ensure_group([p], GROUP)
    await backend.log.ensure_group([p], GROUP)
    ids = await fill(backend.log, p, 3)
    assert await c.acquire("a", [p], LONG) == {p}
    first = await c.read("a", CONSUMER, {p: NEW}, 2)
    assert ids_of(first.entries[0][1]) == ids[:2]
    await backend.log.ensure_group([p], GROUP)  # again: nothing forgotten, nothing reread
    assert await pending(c, "a", p) == ids[:2]
    assert await backend.log.last_delivered([p], GROUP) == {p: ids[1]}
    rest = await c.read("a", CONSUMER, {p: NEW}, 10)
    assert ids_of(rest.entries[0][1]) == ids[2:]


async def test_a_group_made_before_any_entry_gets_every_entry(backend: Backend, app: str) -> None:
    p = part(app, 0)
    c = backend.coordination(app, STREAM, GROUP)
    await backend.log.ensure_group([p], GROUP)
    ids = await fill(backend.log, p, 2)
    assert await c.acquire("a", [p], LONG) == {p}
    got = await c.read("a", CONSUMER, {p: NEW}, 10)
    assert ids_of(got.entries[0][1]) == ids


async def test_reset_forgets_pending_and_adopt_moves_them(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    p = part(app, 0)
    c = backend.coordination(app, STREAM, GROUP)
    await backend.log.ensure_group([p], GROUP)
    ids = await fill(backend.log, p, 3)
    await c.acquire("a", [p], LONG)
    await c.read("a", "old-consumer", {p: NEW}, 10)
    # Another consumer name's pending entries are not ours until adopted.
    assert (await c.read("a", CONSUMER, {p: PENDING}, 10)).entries == [(p, [])]
    assert await backend.log.adopt_pending(p, GROUP, CONSUMER) == 3
    assert await backend.log.adopt_pending(p, GROUP, CONSUMER) == 0
    mine = await c.read("a", CONSUMER, {p: PENDING}, 10)
    assert ids_of(mine.entries[0][1]) == ids

    await admin.reset_group([p], GROUP, "0")
    assert await admin.first_pending(p, GROUP) is None
    assert await admin.backlog([p], GROUP) == {p: (3, 0)}


async def test_wait_for_new_wakes_on_an_append(backend: Backend, app: str) -> None:
    p, q = part(app, 0), part(app, 1)
    [xid] = await fill(backend.log, p, 1)
    # Something newer is there already: at once (however long the block).
    async with asyncio.timeout(HANG_GUARD):
        assert await backend.log.wait_for_new({p: None}, 600_000) is True
    # Nothing newer than what is there: the wait times out (a short block).
    assert await backend.log.wait_for_new({p: xid, q: None}, 10) is False

    waiting = asyncio.create_task(backend.log.wait_for_new({p: xid, q: None}, 600_000))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await fill(backend.log, q, 1)
    async with asyncio.timeout(HANG_GUARD):
        assert await waiting is True


async def test_wait_for_new_can_be_abandoned(backend: Backend, app: str) -> None:
    """Cancelling a wait changes nothing: the next one works as if it never was."""
    p = part(app, 0)
    waiting = asyncio.create_task(backend.log.wait_for_new({p: None}, 600_000))
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await fill(backend.log, p, 1)
    async with asyncio.timeout(HANG_GUARD):
        assert await backend.log.wait_for_new({p: None}, 600_000) is True


async def test_lost_counts_add_up_per_group(backend: Backend, app: str) -> None:
    p, q = part(app, 0), part(app, 1)
    assert await backend.log.lost([p, q], GROUP) == {p: 0, q: 0}
    await backend.log.count_lost(p, GROUP, 3)
    await backend.log.count_lost(p, GROUP, 4)
    await backend.log.count_lost(q, "other", 1)
    assert await backend.log.lost([p, q], GROUP) == {p: 7, q: 0}
    assert await backend.log.lost([p, q], "other") == {p: 0, q: 1}


async def test_last_delivered_leaves_out_partitions_without_the_group(
    backend: Backend, app: str
) -> None:
    """A partition without the group, or with no entry ever, has no position to give."""
    p, q, r = part(app, 0), part(app, 1), part(app, 2)
    c = backend.coordination(app, STREAM, GROUP)
    await backend.log.ensure_group([p], GROUP)
    ids = await fill(backend.log, p, 3)
    await fill(backend.log, q, 1)
    assert await c.acquire("a", [p], LONG) == {p}
    await c.read("a", CONSUMER, {p: NEW}, 2)
    assert await backend.log.last_delivered([p, q, r], GROUP) == {p: ids[1]}
