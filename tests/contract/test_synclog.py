"""SyncLog, optional: synchronous, picklable access to the logs, for engines with
processes of their own (runnel-spark). A store whose ``sync_log()`` is None skips these
tests."""

from __future__ import annotations

import pickle

import pytest

from runnel.store import NEW, Backend, CallIdentity, LogAdmin, SequencedIdentity, SyncLog
from runnel.store.synclog import LogFull, next_id
from tests.contract.support import CONSUMER, GROUP, LONG, part


def fields(n: int) -> dict[bytes, bytes]:
    return {b"n": str(n).encode()}


async def test_append_extents_read_and_nth_ids(app: str, sync_log: SyncLog) -> None:
    a, b, c = part(app, 0), part(app, 1), part(app, 2)
    sync_log.append([(a, fields(0)), (b, fields(100)), (a, fields(1))], maxlen=1000)
    sync_log.append([(a, fields(n)) for n in range(2, 10)])
    [ea, eb, empty] = sync_log.extents([a, b, c])
    assert (ea.length, eb.length) == (10, 1)
    assert (empty.length, empty.first, empty.last) == (0, None, None)
    assert ea.first is not None and ea.last is not None
    pages = list(sync_log.read(a, ea.first, ea.last, 1000))
    ids = [xid.decode() for page in pages for xid, _ in page]
    assert [f[b"n"] for page in pages for _, f in page] == [str(n).encode() for n in range(10)]
    assert (ids[0], ids[-1]) == (ea.first, ea.last)

    # Both bounds included, about ``count`` per page, oldest first.
    pages = list(sync_log.read(a, ids[1], ids[8], 3))
    assert [len(p) for p in pages] == [3, 3, 2]
    assert [f[b"n"] for page in pages for _, f in page] == [str(n).encode() for n in range(1, 9)]
    assert list(sync_log.read(a, next_id(ids[-1]), "+", 3)) == []

    ranges = [(a, ids[2], ids[-1], 4), (a, ids[8], ids[-1], 4), (b, "0-0", "+", 1)]
    assert sync_log.nth_ids(ranges) == [ids[5], ids[9], eb.first]
    assert sync_log.nth_ids([(c, "0-0", "+", 5)]) == [None]


async def test_it_pickles_and_the_copy_connects_again(app: str, sync_log: SyncLog) -> None:
    a = part(app, 0)
    sync_log.append([(a, fields(n)) for n in range(3)])
    copy = pickle.loads(pickle.dumps(sync_log))
    try:
        assert copy.url == sync_log.url
        assert copy.extents([a]) == sync_log.extents([a])
        copy.append([(a, fields(3))])
        assert sync_log.extents([a])[0].length == 4
    finally:
        copy.close()
    sync_log.close()  # a later call connects again
    assert sync_log.extents([a])[0].length == 4


async def test_a_full_partition_refuses_the_append(
    backend: Backend, app: str, sync_log: SyncLog, admin: LogAdmin
) -> None:
    a = part(app, 0)
    await backend.log.ensure_group([a], GROUP)
    sync_log.append([(a, fields(n)) for n in range(10)], maxlen=10)
    with pytest.raises(LogFull) as refused:
        sync_log.append([(a, fields(10)), (a, fields(11))], maxlen=10)
    assert (refused.value.partition, refused.value.group) == (a, GROUP)
    assert await admin.lengths([a]) == {a: 10}

    # drop_oldest: trimmed anyway, what the group never read counted as lost.
    sync_log.append([(a, fields(n)) for n in range(10, 15)], maxlen=10, drop_oldest=True)
    assert await admin.lengths([a]) == {a: 10}
    assert await backend.log.lost([a], GROUP) == {a: 5}

    # Room made by acknowledging: the append goes in.
    c = backend.coordination(app, "orders", GROUP)
    assert await c.acquire("x", [a], LONG) == {a}
    got = await c.read("x", CONSUMER, {a: NEW}, 5)
    assert await c.ack("x", {a: [xid for _, entries in got.entries for xid, _ in entries]}) == []
    sync_log.append([(a, fields(n)) for n in range(15, 20)], maxlen=10)
    assert await admin.lengths([a]) == {a: 10}


async def test_appends_with_identities_take_each_record_once(
    app: str, sync_log: SyncLog, admin: LogAdmin
) -> None:
    """What Spark writes through: a task run again (numbered rows) appends only what is
    not in; a call retried is recognised whole; the reply counts the duplicates."""
    if not sync_log.identities:
        pytest.skip(
            f"optional part not offered: {type(sync_log).__name__}.append() takes no identity"
        )
    a, b = part(app, 0), part(app, 1)
    rows = [(a if n % 2 else b, fields(n)) for n in range(8)]
    first = sync_log.append(rows[:5], identity=SequencedIdentity("write:1", list(range(5))))
    assert (len(first), first.duplicates) == (5, 0)
    again = sync_log.append(rows, identity=SequencedIdentity("write:1", list(range(8))))
    assert again.duplicates == 5 and again[:5] == first
    assert await admin.lengths([a, b]) == {a: 4, b: 4}
    call = CallIdentity("driver", 1)
    ids = sync_log.append(rows[:2], maxlen=1000, identity=call)
    assert sync_log.append(rows[:2], maxlen=1000, identity=call) == ids
    assert await admin.lengths([a, b]) == {a: 5, b: 5}
    sync_log.forget_producer([a, b], "write:1")
    assert sync_log.append(rows[:1], identity=SequencedIdentity("write:1", [0])).duplicates == 0
    assert await admin.duplicates([a, b]) == {a: 3, b: 4}
