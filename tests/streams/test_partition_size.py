"""What a send does with a full partition: the core's part, on ``memory://`` and a real
redis-server. The store's part (holding a partition to its size, refusing what does not
fit, dropping the oldest) is the contract suite's, on every store:
tests/contract/test_log_size.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from runnel import App, Record, Stream
from runnel.exceptions import PartitionFull
from runnel.store.log import NEW, PartitionId
from runnel.testing import memory_url

SIZE = 100  # partition_size; the slack past it before trimming is 1 entry (1 %, at least 1)
GROUP = "proc"
OWNER = "exec-1"


class Ping(Record):
    n: int


@pytest.fixture
async def app(app_name: str, store_url: str) -> AsyncIterator[App]:
    url = memory_url() if store_url == "memory" else store_url
    app = App(name=app_name, redis_url=url, full_timeout=0)
    yield app
    await app.aclose()


def pings(app: App, **options: Any) -> Stream:
    return app.stream(
        "pings", record=Ping, partition_by="n", partition_count=1, partition_size=SIZE, **options
    )


class Group:
    """A processor's consumer group on partition 0, read and acknowledged by hand."""

    def __init__(self, app: App, stream: Stream) -> None:
        self.store = app.store
        self.partition: PartitionId = stream.partitions[0].id
        self.coordination = app.store.coordination(app.name, stream.name, GROUP)

    async def start(self) -> Group:
        await self.store.log.ensure_group([self.partition], GROUP)
        await self.coordination.acquire(OWNER, [self.partition], 60_000)
        return self

    async def read(self, count: int) -> list[bytes]:
        got = await self.coordination.read(OWNER, "runnel", {self.partition: NEW}, count)
        return [xid for _, entries in got.entries for xid, _ in entries]

    async def ack(self, ids: list[bytes]) -> None:
        await self.coordination.ack(OWNER, {self.partition: ids})

    async def backlog(self) -> tuple[int | None, int]:
        return (await self.store.admin().backlog([self.partition], GROUP))[self.partition]


async def length(app: App, stream: Stream) -> int:
    return (await app.store.admin().lengths([stream.partitions[0].id]))[stream.partitions[0].id]


async def send(stream: Stream, first: int, count: int) -> list[bytes]:
    return await stream.send(*[Ping(n=n) for n in range(first, first + count)])


async def test_a_refused_send_says_what_it_waited_for_and_that_nothing_is_in(app: App) -> None:
    stream = pings(app)
    await Group(app, stream).start()
    await send(stream, 0, SIZE)
    with pytest.raises(PartitionFull) as refused:
        await send(stream, SIZE, 2)
    assert (refused.value.stream, refused.value.partition) == ("pings", 0)
    assert refused.value.processor == GROUP
    assert refused.value.ids == [None, None]
    assert "full_timeout" in str(refused.value) and "nothing of this send" in str(refused.value)


async def test_a_waiting_send_goes_in_once_the_processor_makes_room(
    app_name: str, store_url: str
) -> None:
    url = memory_url() if store_url == "memory" else store_url
    app = App(name=app_name, redis_url=url, full_timeout=60)
    try:
        stream = pings(app)
        group = await Group(app, stream).start()
        await send(stream, 0, SIZE)
        waiting = asyncio.create_task(send(stream, SIZE, 10))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await group.ack(await group.read(10))
        assert len(await asyncio.wait_for(waiting, 60)) == 10
        assert await group.backlog() == (SIZE, 0)
    finally:
        await app.aclose()


async def test_a_send_bigger_than_the_size_is_refused_at_once(app: App) -> None:
    stream = pings(app)
    await Group(app, stream).start()
    with pytest.raises(PartitionFull, match="smaller batches"):
        await send(stream, 0, SIZE + 50)
    assert await length(app, stream) == 0
