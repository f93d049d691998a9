"""Tables: committed with the acknowledgement of the entries that changed them, all or
none, and only by the holder of the partition's lock; read back by anyone."""

from __future__ import annotations

import pytest

from runnel.store import (
    NEW,
    Backend,
    Commit,
    Coordination,
    PartitionId,
    Sends,
    TableStore,
)
from tests.contract.support import CONSUMER, GROUP, LONG, STREAM, fill, part, pending

TABLE = "totals"


def coordination(backend: Backend, app: str) -> Coordination:
    return backend.coordination(app, STREAM, GROUP)


@pytest.fixture
def tables(backend: Backend, app: str) -> TableStore:
    found = backend.table_store(app)
    if found is None:
        pytest.skip(f"optional part not offered: {type(backend).__name__}.table_store() is None")
    return found


async def delivered(backend: Backend, app: str, owner: str, n: int, count: int) -> list[bytes]:
    """Partition ``n`` with ``count`` entries, read (not acknowledged) by ``owner``."""
    p = part(app, n)
    await backend.log.ensure_group([p], GROUP)
    await fill(backend.log, p, count)
    c = coordination(backend, app)
    assert await c.acquire(owner, [p], LONG) == {p}
    got = await c.read(owner, CONSUMER, {p: NEW}, count)
    return [xid for _, entries in got.entries for xid, _ in entries]


async def test_a_commit_stores_writes_and_acknowledges_together(
    backend: Backend, app: str, tables: TableStore
) -> None:
    ids = await delivered(backend, app, "a", 0, 3)
    p, c = part(app, 0), coordination(backend, app)
    writes = {TABLE: {b'"ada"': b"2", b'"bob"': b"1"}}
    assert await c.commit("a", {p: Commit(ids=ids[:2], writes=writes)}) == []
    assert await tables.get(TABLE, p, [b'"ada"', b'"bob"', b'"eve"']) == [b"2", b"1", None]
    assert await pending(c, "a", p) == ids[2:]
    await c.commit("a", {p: Commit(ids=ids[2:], writes={TABLE: {b'"bob"': None}})})
    assert await tables.get(TABLE, p, [b'"ada"', b'"bob"']) == [b"2", None]
    assert await pending(c, "a", p) == []


async def test_a_commit_on_a_partition_we_do_not_hold_applies_nothing(
    backend: Backend, app: str, tables: TableStore
) -> None:
    ids = await delivered(backend, app, "a", 0, 2)
    p, c = part(app, 0), coordination(backend, app)
    await c.release("a", [p])
    assert await c.acquire("b", [p], LONG) == {p}
    lost = await c.commit("a", {p: Commit(ids=ids, writes={TABLE: {b"k": b"1"}})})
    assert lost == [p]
    assert await tables.get(TABLE, p, [b"k"]) == [None]
    assert await pending(c, "b", p) == ids  # nothing acknowledged: the new owner reads them


async def test_several_partitions_commit_each_on_its_own(
    backend: Backend, app: str, tables: TableStore
) -> None:
    first = await delivered(backend, app, "a", 0, 1)
    second = await delivered(backend, app, "b", 1, 1)
    c = coordination(backend, app)
    p0, p1 = part(app, 0), part(app, 1)
    lost = await c.commit(
        "a",
        {
            p0: Commit(ids=first, writes={TABLE: {b"x": b"1"}}),
            p1: Commit(ids=second, writes={TABLE: {b"x": b"9"}}),  # b's: refused
        },
    )
    assert lost == [p1]
    assert await tables.get(TABLE, p0, [b"x"]) == [b"1"]
    assert await tables.get(TABLE, p1, [b"x"]) == [None]
    assert await pending(c, "b", p1) == second


async def test_a_commit_applied_twice_leaves_what_once_does(
    backend: Backend, app: str, tables: TableStore
) -> None:
    ids = await delivered(backend, app, "a", 0, 2)
    p, c = part(app, 0), coordination(backend, app)
    commit = Commit(ids=ids, writes={TABLE: {b"k": b"7"}, "other": {b"k": b"x"}})
    await c.commit("a", {p: commit})
    await c.commit("a", {p: commit})  # a reply lost, the commit sent again
    assert await tables.get(TABLE, p, [b"k"]) == [b"7"]
    assert await tables.get("other", p, [b"k"]) == [b"x"]
    assert await pending(c, "a", p) == []


async def test_tables_are_kept_per_source_partition_and_per_table(
    backend: Backend, app: str, tables: TableStore
) -> None:
    c = coordination(backend, app)
    partitions = [part(app, n) for n in range(3)]
    for n, p in enumerate(partitions):
        await c.acquire("a", [p], LONG)
        await c.commit("a", {p: Commit(writes={TABLE: {b"k": str(n).encode()}})})
    assert [await tables.get(TABLE, p, [b"k"]) for p in partitions] == [[b"0"], [b"1"], [b"2"]]
    assert await tables.sizes(TABLE, partitions) == dict.fromkeys(partitions, 1)
    assert await tables.sizes("other", partitions[:1]) == {partitions[0]: 0}
    await tables.clear(TABLE, partitions[:2])
    assert await tables.sizes(TABLE, partitions) == {
        partitions[0]: 0,
        partitions[1]: 0,
        partitions[2]: 1,
    }


async def test_a_scan_returns_every_entry(backend: Backend, app: str, tables: TableStore) -> None:
    c, p = coordination(backend, app), part(app, 0)
    await c.acquire("a", [p], LONG)
    stored = {f"key{n}".encode(): str(n).encode() for n in range(1500)}
    await c.commit("a", {p: Commit(writes={TABLE: stored})})
    seen: dict[bytes, bytes] = {}
    cursor, pages = b"", 0
    while True:
        cursor, entries = await tables.scan(TABLE, p, cursor, 200)
        seen.update(entries)
        pages += 1
        if not cursor:
            break
    assert seen == stored
    assert pages > 1
    empty: PartitionId = part(app, 5)
    assert await tables.scan(TABLE, empty, b"", 100) == (b"", [])


async def test_values_are_bytes_as_given(backend: Backend, app: str, tables: TableStore) -> None:
    c, p = coordination(backend, app), part(app, 0)
    await c.acquire("a", [p], LONG)
    value = bytes(range(256)) * 10
    await c.commit("a", {p: Commit(writes={TABLE: {b"\x00binary key": value}})})
    assert await tables.get(TABLE, p, [b"\x00binary key"]) == [value]


async def test_sends_are_appended_once_even_when_the_commit_comes_twice(
    backend: Backend, app: str, tables: TableStore
) -> None:
    ids = await delivered(backend, app, "a", 0, 3)
    p, c = part(app, 0), coordination(backend, app)
    out = [part(app, n, "shipped") for n in range(2)]
    sends = [
        Sends([ids[0]], [(out[0], {b"n": b"1"}, None), (out[1], {b"n": b"2"}, None)]),
        Sends([ids[1]], [(out[0], {b"n": b"3"}, 100)]),
    ]
    commit = Commit(ids=ids[2:], sends=sends)
    assert await c.commit("a", {p: commit}) == []
    await c.relay([p])
    assert await c.commit("a", {p: commit}) == []  # a reply lost, the commit sent again
    await c.relay([p])
    await c.relay([p])
    assert await pending(c, "a", p) == []
    scanned = {}
    for q in out:
        admin = backend.admin()
        if admin is None:
            pytest.skip("reading the outputs back needs admin()")
        scanned[q] = [fields[b"n"] for _, fields in await admin.scan(q, None, 100)]
    assert scanned == {out[0]: [b"1", b"3"], out[1]: [b"2"]}


async def test_sends_of_a_partition_we_do_not_hold_are_not_appended(
    backend: Backend, app: str, tables: TableStore
) -> None:
    ids = await delivered(backend, app, "a", 0, 1)
    p, c = part(app, 0), coordination(backend, app)
    await c.release("a", [p])
    target = part(app, 0, "shipped")
    lost = await c.commit("a", {p: Commit(sends=[Sends(ids, [(target, {b"n": b"1"}, None)])])})
    assert lost == [p]
    await c.relay([p])
    admin = backend.admin()
    if admin is not None:
        assert await admin.lengths([target]) == {target: 0}


async def test_deadlines_commit_with_the_writes_and_come_back_earliest_first(
    backend: Backend, app: str, tables: TableStore
) -> None:
    ids = await delivered(backend, app, "a", 0, 3)
    p, c = part(app, 0), coordination(backend, app)
    whens = {TABLE: {b'"ada"': 120.0, b'"bob"': 60.5, b'"eve"': 1e12}}
    await c.commit("a", {p: Commit(ids=ids[:1], writes={TABLE: {b'"ada"': b"1"}}, deadlines=whens)})
    assert await tables.due(TABLE, p, 2) == [(b'"bob"', 60.5), (b'"ada"', 120.0)]
    # Changed, dropped, and a table with deadlines but no writes in this commit.
    later = {TABLE: {b'"bob"': None, b'"ada"': 30.0}, "other": {b"k": 5.0}}
    await c.commit("a", {p: Commit(ids=ids[1:2], deadlines=later)})
    assert await tables.due(TABLE, p, 10) == [(b'"ada"', 30.0), (b'"eve"', 1e12)]
    assert await tables.due("other", p, 10) == [(b"k", 5.0)]
    assert await tables.due(TABLE, part(app, 1), 10) == []
    assert await pending(c, "a", p) == ids[2:]


async def test_deadlines_of_a_partition_we_do_not_hold_are_not_set(
    backend: Backend, app: str, tables: TableStore
) -> None:
    ids = await delivered(backend, app, "a", 0, 1)
    p, c = part(app, 0), coordination(backend, app)
    await c.release("a", [p])
    assert await c.acquire("b", [p], LONG) == {p}
    assert await c.commit("a", {p: Commit(ids=ids, deadlines={TABLE: {b"k": 1.0}})}) == [p]
    assert await tables.due(TABLE, p, 10) == []


async def test_clearing_a_table_drops_its_deadlines(
    backend: Backend, app: str, tables: TableStore
) -> None:
    ids = await delivered(backend, app, "a", 0, 1)
    p, c = part(app, 0), coordination(backend, app)
    await c.commit(
        "a", {p: Commit(ids=ids, writes={TABLE: {b"k": b"v"}}, deadlines={TABLE: {b"k": 1.0}})}
    )
    await tables.clear(TABLE, [p])
    assert await tables.due(TABLE, p, 10) == []
    assert await tables.get(TABLE, p, [b"k"]) == [None]


async def test_deadlines_page_by_offset(backend: Backend, app: str, tables: TableStore) -> None:
    ids = await delivered(backend, app, "a", 0, 1)
    p, c = part(app, 0), coordination(backend, app)
    whens = {TABLE: {f'"k{i:02}"'.encode(): float(i) for i in range(12)}}
    await c.commit("a", {p: Commit(ids=ids, deadlines=whens)})
    first = await tables.due(TABLE, p, 5)
    rest = await tables.due(TABLE, p, 10, offset=5)
    assert [w for _, w in first + rest] == [float(i) for i in range(12)]


async def test_a_read_commits_writes_only_on_partitions_we_hold(
    backend: Backend, app: str, tables: TableStore
) -> None:
    """A commit carried by a read: where the lock is ours, the writes are stored, the ids
    acknowledged and the next entries read, in one step; a partition another executor
    holds gets nothing stored, acknowledged or read, and is reported lost."""
    ids0 = await delivered(backend, app, "a", 0, 2)
    ids1 = await delivered(backend, app, "b", 1, 2)
    p0, p1, c = part(app, 0), part(app, 1), coordination(backend, app)
    await fill(backend.log, p0, 1)
    await fill(backend.log, p1, 1)
    commits = {
        p0: Commit(ids=ids0, writes={TABLE: {b'"ada"': b"2"}}),
        p1: Commit(ids=ids1, writes={TABLE: {b'"bob"': b"9"}}),
    }
    result, lost = await c.read_and_commit("a", CONSUMER, {p0: NEW, p1: NEW}, 10, commits)
    assert lost == [p1] and result.lost == [p1]
    assert [(p, len(entries)) for p, entries in result.entries] == [(p0, 1)]
    assert await tables.get(TABLE, p0, [b'"ada"']) == [b"2"]
    assert await tables.get(TABLE, p1, [b'"bob"']) == [None]
    assert await pending(c, "a", p0) == [xid for xid, _ in result.entries[0][1]]
    assert await pending(c, "b", p1) == ids1


async def test_a_read_carries_ids_and_writes_of_partitions_side_by_side(
    backend: Backend, app: str, tables: TableStore
) -> None:
    """One partition's ids alone and another's writes with theirs, in one read that reads
    neither: both acknowledged, the writes stored."""
    ids0 = await delivered(backend, app, "a", 0, 2)
    ids1 = await delivered(backend, app, "a", 1, 2)
    p0, p1, c = part(app, 0), part(app, 1), coordination(backend, app)
    commits = {p0: Commit(ids=ids0), p1: Commit(ids=ids1[:1], writes={TABLE: {b"k": b"1"}})}
    result, lost = await c.read_and_commit("a", CONSUMER, {}, 10, commits)
    assert (result.entries, result.lost, lost) == ([], [], [])
    assert await pending(c, "a", p0) == []
    assert await pending(c, "a", p1) == ids1[1:]
    assert await tables.get(TABLE, p1, [b"k"]) == [b"1"]
