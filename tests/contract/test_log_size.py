"""Log, held to a size: ``append(maxlen=...)`` (a stream's ``partition_size``) trims a
partition without losing what a group did not acknowledge, or with ``drop_oldest``
trims it anyway and counts what each group never read as lost.

A consumer group is driven by hand through the store's coordination (read, acknowledge),
so each test says exactly which entries a processor has read and acknowledged. How a send
waits for room and what it then says is the core's: tests/streams/test_partition_size.py.
"""

from __future__ import annotations

import pytest

from runnel.exceptions import PartitionFull
from runnel.store import NEW, PENDING, Backend, LogAdmin, PartitionId
from tests.contract.support import CONSUMER, GROUP, LONG, fill, ids_of, part

SIZE = 100  # maxlen; the slack past it before trimming is 1 entry (1 %, at least 1)
STREAM = "pings"
OWNER = "exec-1"


class Group:
    """A processor's consumer group on partition 0, read and acknowledged by hand."""

    def __init__(self, backend: Backend, app: str, name: str = GROUP) -> None:
        self.backend = backend
        self.name = name
        self.partition: PartitionId = part(app, 0, STREAM)
        self.coordination = backend.coordination(app, STREAM, name)

    async def start(self) -> Group:
        await self.backend.log.ensure_group([self.partition], self.name)
        await self.coordination.acquire(OWNER, [self.partition], LONG)
        return self

    async def read(self, count: int) -> list[bytes]:
        got = await self.coordination.read(OWNER, CONSUMER, {self.partition: NEW}, count)
        return [xid for _, entries in got.entries for xid, _ in entries]

    async def ack(self, ids: list[bytes]) -> None:
        await self.coordination.ack(OWNER, {self.partition: ids})

    async def backlog(self, admin: LogAdmin) -> tuple[int | None, int]:
        return (await admin.backlog([self.partition], self.name))[self.partition]

    async def lost(self) -> int:
        return (await self.backend.log.lost([self.partition], self.name))[self.partition]


async def send(
    backend: Backend, app: str, first: int, count: int, drop_oldest: bool = False
) -> list[bytes]:
    """What a send of ``count`` records to a stream of one partition appends."""
    p = part(app, 0, STREAM)
    entries = [(p, {b"n": str(n).encode()}) for n in range(first, first + count)]
    return await backend.log.append(entries, maxlen=SIZE, drop_oldest=drop_oldest)


async def length(admin: LogAdmin, app: str) -> int:
    p = part(app, 0, STREAM)
    return (await admin.lengths([p]))[p]


async def test_without_a_group_the_size_caps_the_partition(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    for start in range(0, 300, 30):
        await send(backend, app, start, 30)
    assert SIZE <= await length(admin, app) <= SIZE + 1


async def test_unread_entries_are_kept_and_the_append_is_refused(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    group = await Group(backend, app).start()
    await send(backend, app, 0, SIZE)
    with pytest.raises(PartitionFull) as refused:
        await send(backend, app, SIZE, 2)
    assert (refused.value.stream, refused.value.partition) == ("pings", 0)
    assert refused.value.processor == GROUP
    assert refused.value.ids == [None, None]
    assert refused.value.size == SIZE
    assert await length(admin, app) == SIZE
    assert await group.backlog(admin) == (SIZE, 0)


async def test_what_every_group_acknowledged_makes_room(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    group = await Group(backend, app).start()
    first = await send(backend, app, 0, SIZE)
    read = await group.read(50)
    assert read == first[:50]
    with pytest.raises(PartitionFull):  # read, not acknowledged: still needed
        await send(backend, app, SIZE, 50)
    await group.ack(read)
    await send(backend, app, SIZE, 50)
    assert SIZE <= await length(admin, app) <= SIZE + 1
    assert await group.backlog(admin) == (SIZE - 50 + 50, 0)
    assert await group.lost() == 0


async def test_the_slowest_of_several_groups_is_named(backend: Backend, app: str) -> None:
    fast = await Group(backend, app).start()
    slow = Group(backend, app, "laggard")
    await backend.log.ensure_group([slow.partition], "laggard")
    ids = await send(backend, app, 0, SIZE)
    await fast.ack(await fast.read(SIZE))
    with pytest.raises(PartitionFull) as refused:
        await send(backend, app, SIZE, 10)
    assert refused.value.processor == "laggard"
    assert ids


async def test_an_append_goes_in_once_the_processor_made_room(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    group = await Group(backend, app).start()
    await send(backend, app, 0, SIZE)
    with pytest.raises(PartitionFull):
        await send(backend, app, SIZE, 10)
    await group.ack(await group.read(10))
    assert len(await send(backend, app, SIZE, 10)) == 10
    assert await group.backlog(admin) == (SIZE, 0)


async def test_an_append_bigger_than_the_size_is_refused_whole(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    await Group(backend, app).start()
    with pytest.raises(PartitionFull):
        await send(backend, app, 0, SIZE + 50)
    assert await length(admin, app) == 0


async def test_drop_oldest_counts_what_a_group_never_read(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    group = await Group(backend, app).start()
    await send(backend, app, 0, SIZE, drop_oldest=True)
    read = await group.read(10)  # delivered, not acknowledged: not counted when trimmed
    await send(backend, app, SIZE, 50, drop_oldest=True)
    assert await length(admin, app) == SIZE
    assert await group.lost() == 40  # the 50 oldest went: 10 read, 40 never read
    assert await group.backlog(admin) == (SIZE, 10)  # the lag no longer counts the lost ones
    got = await group.read(1000)
    assert len(got) == SIZE
    await group.ack(got)
    assert await group.backlog(admin) == (0, 10)
    assert read


async def test_drop_oldest_without_a_group_counts_nothing(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    await send(backend, app, 0, 3 * SIZE, drop_oldest=True)
    assert SIZE <= await length(admin, app) <= SIZE + 1
    p = part(app, 0, STREAM)
    assert (await backend.log.lost([p], GROUP)) == {p: 0}


async def test_trimmed_pending_entries_read_back_without_fields(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    p = part(app, 0)
    c = backend.coordination(app, "orders", GROUP)
    await backend.log.ensure_group([p], GROUP)
    await c.acquire("a", [p], LONG)
    ids = await fill(backend.log, p, 2)
    await c.read("a", CONSUMER, {p: NEW}, 10)
    await backend.log.append([(p, {b"n": b"x"}) for _ in range(3)], maxlen=3, drop_oldest=True)
    assert await admin.lengths([p]) == {p: 3}
    again = await c.read("a", CONSUMER, {p: PENDING}, 10)
    assert again.entries == [(p, [(ids[0], None), (ids[1], None)])]
    assert ids_of(again.entries[0][1]) == ids


async def test_appended_counts_every_entry_ever_appended_whatever_was_trimmed(
    backend: Backend, app: str, admin: LogAdmin
) -> None:
    """The count a monitor takes arrivals from (the dashboard's throughput): trimming and
    removing lower the length, never this."""
    p = part(app, 0, STREAM)
    never = part(app, 1, STREAM)
    assert await admin.appended([p, never]) == {p: 0, never: 0}
    group = await Group(backend, app).start()
    sent = 0
    for _ in range(5):  # each round is read and acknowledged, so trimming can take it
        await send(backend, app, sent, 60)
        sent += 60
        await group.ack(await group.read(60))
        counted = (await admin.appended([p]))[p]
        if counted is None:  # as LogAdmin.appended allows: Redis 6.2 keeps no such count
            pytest.skip("this server keeps no count of the entries ever appended")
        assert counted == sent
    await send(backend, app, sent, 30, drop_oldest=True)
    sent += 30
    assert await length(admin, app) < sent
    first = (await admin.scan(p, None, 1))[0][0]
    assert await admin.remove(p, [first]) == 1
    assert await admin.appended([p, never]) == {p: sent, never: 0}
