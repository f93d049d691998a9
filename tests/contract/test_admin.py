"""LogAdmin, optional: what the operating commands read and change in the logs (status,
dead letters, ``processor skip`` and ``reset``). A store whose ``admin()`` is None skips
these tests."""

from __future__ import annotations

from runnel.store import NEW, Backend, LogAdmin
from tests.contract.support import CONSUMER, GROUP, LONG, fill, ids_of, part


async def test_groups_are_independent_and_start_where_told(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    p = part(app, 1)
    ids = await fill(backend.log, p, 4)
    await backend.log.ensure_group([p], "one")
    await admin.reset_group([p], "two", "$")
    await admin.reset_group([p], "three", ids[1].decode())
    assert await admin.backlog([p], "one") == {p: (4, 0)}
    assert await admin.backlog([p], "two") == {p: (0, 0)}
    assert await admin.backlog([p], "three") == {p: (2, 0)}
    assert await admin.backlog([p], "none") == {p: (4, 0)}
    assert await admin.backlog([part(app, 9)], "one") == {part(app, 9): (0, 0)}
    assert await backend.log.last_delivered([p, part(app, 9)], "two") == {p: ids[-1]}


async def test_scan_remove_and_unfenced_ack(backend: Backend, app: str, admin: LogAdmin) -> None:
    p = part(app, 0, "dead.orders")
    ids = await fill(backend.log, p, 5)
    page = await admin.scan(p, None, 2)
    assert ids_of(page) == ids[:2]
    assert ids_of(await admin.scan(p, ids[1], 10)) == ids[2:]
    assert await admin.remove(p, [ids[0], ids[3], b"1-1"]) == 2
    assert ids_of(await admin.scan(p, None, 10)) == [ids[1], ids[2], ids[4]]
    assert await admin.lengths([p, part(app, 5)]) == {p: 3, part(app, 5): 0}

    await backend.log.ensure_group([p], GROUP)
    c = backend.coordination(app, "dead.orders", GROUP)
    await c.acquire("a", [p], LONG)
    await c.read("a", CONSUMER, {p: NEW}, 10)
    first = await admin.first_pending(p, GROUP)
    assert first == ids[1]
    await admin.ack(p, GROUP, [first])
    assert await admin.first_pending(p, GROUP) == ids[2]


async def test_nothing_there_is_nothing_pending(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    p = part(app, 0)
    assert await admin.first_pending(p, GROUP) is None
    assert await admin.scan(p, None, 10) == []
    assert await admin.remove(p, [b"1-1"]) == 0
    await fill(backend.log, p, 1)
    assert await admin.first_pending(p, "no-such-group") is None


async def test_reset_to_the_end_and_to_an_id_forgets_pending(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    p = part(app, 0)
    c = backend.coordination(app, "orders", GROUP)
    await backend.log.ensure_group([p], GROUP)
    ids = await fill(backend.log, p, 4)
    await c.acquire("a", [p], LONG)
    await c.read("a", CONSUMER, {p: NEW}, 2)
    assert await admin.backlog([p], GROUP) == {p: (2, 2)}
    await admin.reset_group([p], GROUP, "$")
    assert await admin.backlog([p], GROUP) == {p: (0, 0)}
    assert await admin.first_pending(p, GROUP) is None
    await admin.reset_group([p], GROUP, ids[0].decode())
    assert await admin.backlog([p], GROUP) == {p: (3, 0)}
    got = await c.read("a", CONSUMER, {p: NEW}, 10)
    assert ids_of(got.entries[0][1]) == ids[1:]
