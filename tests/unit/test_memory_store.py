"""The ``memory://`` store's own ways: what the store contract suite (tests/contract, run
on every store) does not cover. A blocked reader woken from another thread's loop, stores
shared by name in one process, refused by the CLI and by worker processes, and reads
that look up every group before delivering anything.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from runnel import App, Record
from runnel.cli import cli
from runnel.memory import server as servers
from runnel.memory.backend import MemoryBackend
from runnel.memory.logs import NoGroup
from runnel.memory.server import MemoryServer
from runnel.settings import Settings
from runnel.store.log import NEW, PartitionId
from runnel.store.resolve import backend_for

GROUP = "proc"
CONSUMER = "runnel"


@pytest.fixture
def backend() -> MemoryBackend:
    return MemoryBackend(MemoryServer("test"))


def part(n: int, stream: str = "orders") -> PartitionId:
    return PartitionId("myproj.shop", stream, n)  # a dotted app name: never parsed


async def fill(b: MemoryBackend, p: PartitionId, count: int) -> list[bytes]:
    return await b.log.append([(p, {b"n": str(i).encode()}) for i in range(count)])


async def test_reading_without_a_group_is_an_error_and_reads_nothing(
    backend: MemoryBackend,
) -> None:
    """Every group is looked up before anything is delivered (a store reading each
    partition on its own may deliver from the others: see tests/contract)."""
    p, q = part(0), part(1)
    c = backend.coordination("myproj.shop", "orders", GROUP)
    await backend.log.ensure_group([p], GROUP)
    await fill(backend, p, 2)
    await fill(backend, q, 2)
    await c.acquire("a", [p, q], 10_000)
    with pytest.raises(NoGroup, match="no consumer group"):
        await c.read("a", CONSUMER, {p: NEW, q: NEW}, 10)
    assert await backend.admin().backlog([p], GROUP) == {p: (2, 0)}  # p delivered nothing


async def test_a_blocked_reader_is_woken_from_another_threads_loop(
    backend: MemoryBackend,
) -> None:
    """The ``delay_sync`` case: a write from a loop in another thread wakes a reader
    blocked in this one (no polling: the wait would otherwise last the whole block)."""
    p = part(0)
    c = backend.coordination("myproj.shop", "orders", GROUP)
    tail = await c.control_tail()
    control = asyncio.create_task(c.control(tail, 600_000))
    new = asyncio.create_task(backend.log.wait_for_new({p: None}, 600_000))
    await asyncio.sleep(0)

    def elsewhere() -> None:
        async def write() -> None:
            await c.announce("join", "e9")
            await backend.log.append([(p, {b"n": b"1"})])

        asyncio.run(write())

    thread = threading.Thread(target=elsewhere)
    thread.start()
    position, messages = await control
    assert messages == [{"reason": "join", "executor": "e9"}]
    assert await new is True
    thread.join()
    # Nothing newer than what is there: the wait times out (a short block).
    [xid] = [x for x, _ in await backend.admin().scan(p, None, 10)]
    assert await backend.log.wait_for_new({p: xid}, 10) is False
    assert await c.control(position, 10) == (position, [])


# Naming, and apps sharing a store.


@pytest.fixture
def store_name() -> Iterator[str]:
    name = f"t{uuid.uuid4().hex[:8]}"
    yield name
    servers.forget(name)


async def test_the_same_name_is_the_same_store_in_one_process(store_name: str) -> None:
    settings = Settings()
    one = backend_for(f"memory://{store_name}", settings)
    two = backend_for(f"memory://{store_name}", settings)
    other = backend_for("memory://other-" + store_name, settings)
    assert isinstance(one, MemoryBackend) and isinstance(other, MemoryBackend)
    assert isinstance(two, MemoryBackend)
    await one.log.append([(part(0), {b"n": b"1"})])
    assert await two.admin().lengths([part(0)]) == {part(0): 1}
    assert await other.admin().lengths([part(0)]) == {part(0): 0}
    servers.forget("other-" + store_name)
    assert not one.shared


class Ping(Record):
    key: str
    n: int


async def test_two_workers_of_one_app_share_a_memory_store(store_name: str) -> None:
    """Two apps of the same name on one memory:// store: every event is processed once,
    spread over both workers."""
    seen: list[tuple[str, int]] = []
    done = asyncio.Event()
    apps = []
    for tag in ("a", "b"):
        app = App(
            name="shop",
            redis_url=f"memory://{store_name}",
            default_join_delay=0,
            default_lock_expiry=2,
        )
        pings = app.stream("pings", record=Ping, partition_by="key", partition_count=4)

        async def proc(events, tag: str = tag) -> None:
            async for event in events:
                seen.append((tag, event.record.n))
                if len(seen) == 40:
                    done.set()

        app.processor(pings, name="proc")(proc)
        apps.append((app, pings))
    workers = [asyncio.create_task(app.run_worker()) for app, _ in apps]
    try:
        await apps[0][1].send(*[Ping(key=f"k{i}", n=i) for i in range(40)])
        async with asyncio.timeout(60):  # a hang guard only
            await done.wait()
        assert sorted(n for _, n in seen) == list(range(40))
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


def test_the_cli_refuses_to_inspect_a_store_of_its_own(tmp_path, monkeypatch) -> None:
    (tmp_path / "memapp.py").write_text(
        "from runnel import App\napp = App(name='m', redis_url='memory://x')\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(cli, ["status", "memapp:app"])
    assert result.exit_code != 0
    assert "Error: memory://x is a store inside one process" in result.output
    assert "Traceback" not in result.output


def test_worker_processes_refuse_a_store_of_one_process(tmp_path, monkeypatch) -> None:
    (tmp_path / "memapp2.py").write_text(
        "from runnel import App\napp = App(name='m', redis_url='memory://x')\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(cli, ["worker", "memapp2:app", "--processes", "2"])
    assert result.exit_code != 0
    assert "Error: --processes 2: memory://x is a store inside one process" in result.output
    assert "Traceback" not in result.output
