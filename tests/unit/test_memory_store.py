"""The ``memory://`` store on its own: consumer groups, fencing, expiry, waking waiters.

Expiry is driven by a clock the test moves, never by sleeping.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from runnel import App, Record
from runnel.cli import cli
from runnel.memory import server as servers
from runnel.memory.backend import MemoryBackend
from runnel.memory.log import MemoryLog
from runnel.memory.logs import NoGroup
from runnel.memory.server import MemoryServer
from runnel.settings import Settings
from runnel.store.coordination import Member
from runnel.store.log import NEW, PENDING, PartitionId, Position
from runnel.store.resolve import backend_for

GROUP = "proc"
CONSUMER = "runnel"


class ManualClock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def transport(clock: ManualClock) -> Roles:
    return Roles(MemoryBackend(MemoryServer("test", clock=clock)))


class Roles:
    """The memory store's log and the rest of its roles under one name, as these tests
    were written before the store interface was split by role."""

    def __init__(self, backend: MemoryBackend) -> None:
        self.backend = backend
        self.server = backend.server

    def __getattr__(self, name: str) -> Any:
        if hasattr(MemoryLog, name):
            return getattr(self.backend.log, name)
        return getattr(self.backend, name)


def part(n: int, stream: str = "orders") -> PartitionId:
    return PartitionId("myproj.shop", stream, n)  # a dotted app name: never parsed


def numbers(entries: list) -> list[bytes]:
    return [fields[b"n"] for _, fields in entries]


async def fill(t: Roles, p: PartitionId, count: int) -> list[bytes]:
    return await t.append([(p, {b"n": str(i).encode()}) for i in range(count)])


# Logs and consumer groups.


async def test_entries_are_delivered_once_per_group_then_reread_until_acknowledged(
    transport: Roles,
) -> None:
    p = part(0)
    c = transport.coordination("myproj.shop", "orders", GROUP)
    await transport.ensure_group([p], GROUP)
    ids = await fill(transport, p, 5)
    assert ids == sorted(ids, key=lambda x: tuple(map(int, x.split(b"-"))))
    assert await c.acquire("a", [p], 10_000) == {p}

    first = await c.read("a", CONSUMER, {p: NEW}, 3)
    assert [(q, numbers(e)) for q, e in first.entries] == [(p, [b"0", b"1", b"2"])]
    second = await c.read("a", CONSUMER, {p: NEW}, 10)
    assert numbers(second.entries[0][1]) == [b"3", b"4"]
    # Nothing new: no entries for the partition at all.
    assert (await c.read("a", CONSUMER, {p: NEW}, 10)).entries == []
    assert await transport.last_delivered([p], GROUP) == {p: ids[-1]}
    assert await transport.backlog([p], GROUP) == {p: (0, 5)}

    # Unacknowledged entries are read again from the start, and after a given id.
    again = await c.read("a", CONSUMER, {p: PENDING}, 10)
    assert [x for x, _ in again.entries[0][1]] == ids
    after = await c.read("a", CONSUMER, {p: Position.pending_after(ids[2])}, 10)
    assert [x for x, _ in after.entries[0][1]] == ids[3:]

    assert await c.ack("a", {p: ids[:4]}) == []
    assert await transport.first_pending(p, GROUP) == ids[4]
    assert await transport.backlog([p], GROUP) == {p: (0, 1)}
    # History drained: an empty list, so the reader knows to read new entries next.
    drained = await c.read("a", CONSUMER, {p: Position.pending_after(ids[4])}, 10)
    assert drained.entries == [(p, [])]


async def test_groups_are_independent_and_start_where_told(transport: Roles) -> None:
    p = part(1)
    ids = await fill(transport, p, 4)
    await transport.ensure_group([p], "one")
    await transport.reset_group([p], "two", "$")
    await transport.reset_group([p], "three", ids[1].decode())
    assert await transport.backlog([p], "one") == {p: (4, 0)}
    assert await transport.backlog([p], "two") == {p: (0, 0)}
    assert await transport.backlog([p], "three") == {p: (2, 0)}
    assert await transport.backlog([p], "none") == {p: (4, 0)}
    assert await transport.backlog([part(9)], "one") == {part(9): (0, 0)}
    assert await transport.last_delivered([p, part(9)], "two") == {p: ids[-1]}


async def test_reset_forgets_pending_and_adopt_moves_them(transport: Roles) -> None:
    p = part(0)
    c = transport.coordination("myproj.shop", "orders", GROUP)
    await transport.ensure_group([p], GROUP)
    ids = await fill(transport, p, 3)
    await c.acquire("a", [p], 10_000)
    await c.read("a", "old-consumer", {p: NEW}, 10)
    # Another consumer name's pending entries are not ours until adopted.
    assert (await c.read("a", CONSUMER, {p: PENDING}, 10)).entries == [(p, [])]
    assert await transport.adopt_pending(p, GROUP, CONSUMER) == 3
    assert await transport.adopt_pending(p, GROUP, CONSUMER) == 0
    mine = await c.read("a", CONSUMER, {p: PENDING}, 10)
    assert [x for x, _ in mine.entries[0][1]] == ids

    await transport.reset_group([p], GROUP, "0")
    assert await transport.first_pending(p, GROUP) is None
    assert await transport.backlog([p], GROUP) == {p: (3, 0)}


async def test_trimmed_pending_entries_read_back_without_fields(
    transport: Roles,
) -> None:
    p = part(0)
    c = transport.coordination("myproj.shop", "orders", GROUP)
    await transport.ensure_group([p], GROUP)
    await c.acquire("a", [p], 10_000)
    ids = await fill(transport, p, 2)
    await c.read("a", CONSUMER, {p: NEW}, 10)
    await transport.append([(p, {b"n": b"x"}) for _ in range(3)], maxlen=3, drop_oldest=True)
    assert await transport.lengths([p]) == {p: 3}
    again = await c.read("a", CONSUMER, {p: PENDING}, 10)
    assert again.entries == [(p, [(ids[0], None), (ids[1], None)])]


async def test_scan_remove_and_unfenced_ack(transport: Roles) -> None:
    p = part(0, "dead.orders")
    ids = await fill(transport, p, 5)
    page = await transport.scan(p, None, 2)
    assert [x for x, _ in page] == ids[:2]
    assert [x for x, _ in await transport.scan(p, ids[1], 10)] == ids[2:]
    assert await transport.remove(p, [ids[0], ids[3], b"1-1"]) == 2
    assert [x for x, _ in await transport.scan(p, None, 10)] == [ids[1], ids[2], ids[4]]
    assert await transport.lengths([p, part(5)]) == {p: 3, part(5): 0}

    await transport.ensure_group([p], GROUP)
    c = transport.coordination("myproj.shop", "dead.orders", GROUP)
    await c.acquire("a", [p], 10_000)
    await c.read("a", CONSUMER, {p: NEW}, 10)
    first = await transport.first_pending(p, GROUP)
    assert first == ids[1]
    await transport.ack(p, GROUP, [first])
    assert await transport.first_pending(p, GROUP) == ids[2]


async def test_values_are_stored_as_bytes(transport: Roles) -> None:
    p = part(0)
    await transport.append([(p, {"data": "text", b"n": 3, b"x": 1.5})])
    [(_, fields)] = await transport.scan(p, None, 10)
    assert fields == {b"data": b"text", b"n": b"3", b"x": b"1.5"}


async def test_reading_without_a_group_is_an_error_and_reads_nothing(
    transport: Roles,
) -> None:
    p, q = part(0), part(1)
    c = transport.coordination("myproj.shop", "orders", GROUP)
    await transport.ensure_group([p], GROUP)
    await fill(transport, p, 2)
    await fill(transport, q, 2)
    await c.acquire("a", [p, q], 10_000)
    with pytest.raises(NoGroup, match="no consumer group"):
        await c.read("a", CONSUMER, {p: NEW, q: NEW}, 10)
    assert await transport.backlog([p], GROUP) == {p: (2, 0)}  # p delivered nothing


# Fencing, locks and heartbeats.


async def test_reads_and_acks_only_on_partitions_whose_lock_we_hold(
    transport: Roles, clock: ManualClock
) -> None:
    p0, p1, p2 = part(0), part(1), part(2)
    c = transport.coordination("myproj.shop", "orders", GROUP)
    await transport.ensure_group([p0, p1, p2], GROUP)
    for p in (p0, p1, p2):
        await fill(transport, p, 2)
    assert await c.acquire("a", [p0], 1_000) == {p0}
    assert await c.acquire("b", [p0, p1], 1_000) == {p1}

    result = await c.read("a", CONSUMER, {p0: NEW, p1: NEW, p2: NEW}, 10)
    assert result.lost == [p1, p2]
    assert [p for p, _ in result.entries] == [p0]
    assert await transport.backlog([p1, p2], GROUP) == {p1: (2, 0), p2: (2, 0)}
    ids = [x for x, _ in result.entries[0][1]]

    # a's lock expires and b takes it: a can no longer acknowledge or read there.
    clock.advance(1.0)
    assert await c.lock_owners([p0, p1]) == {p0: None, p1: None}
    assert await c.acquire("b", [p0], 10_000) == {p0}
    assert await c.ack("a", {p0: ids}) == [p0]
    assert await transport.backlog([p0], GROUP) == {p0: (0, 2)}
    assert (await c.read("a", CONSUMER, {p0: PENDING}, 10)).lost == [p0]
    # The new owner reads the unacknowledged entries again and acknowledges them.
    mine = await c.read("b", CONSUMER, {p0: PENDING}, 10)
    assert [x for x, _ in mine.entries[0][1]] == ids
    assert await c.ack("b", {p0: ids}) == []
    assert await transport.backlog([p0], GROUP) == {p0: (0, 0)}


async def test_locks_expire_unless_beaten_and_release_only_our_own(
    transport: Roles, clock: ManualClock
) -> None:
    p0, p1 = part(0), part(1)
    c = transport.coordination("myproj.shop", "orders", GROUP)
    assert await c.acquire("a", [p0, p1], 3_000) == {p0, p1}
    assert await c.alive(["a"]) == set()
    clock.advance(2.0)
    assert await c.beat("a", [p0], 3_000) == {p0}  # extends p0 only
    assert await c.alive(["a", "b"]) == {"a"}
    clock.advance(2.0)
    assert await c.lock_owners([p0, p1]) == {p0: "a", p1: None}
    assert await c.beat("a", [p0, p1], 3_000) == {p0}  # a beat takes no free lock
    await c.release("b", [p0])
    assert await c.lock_owners([p0]) == {p0: "a"}
    await c.release("a", [p0])
    assert await c.lock_owners([p0]) == {p0: None}
    clock.advance(3.0)
    assert await c.alive(["a"]) == set()


async def test_leadership_expires_and_is_held_by_one(transport: Roles, clock: ManualClock) -> None:
    one, other = transport.leadership("myproj.shop"), transport.leadership("myproj.shop")
    assert await one.leader() is None
    assert await one.claim("x", 5_000)
    assert not await other.claim("y", 5_000)
    clock.advance(4.0)
    assert await one.claim("x", 5_000)  # renewed
    clock.advance(4.0)
    assert await other.leader() == "x"
    await other.resign("y")  # not y's to give up
    assert await other.leader() == "x"
    clock.advance(1.0)
    assert await other.leader() is None
    assert await other.claim("y", 5_000)
    await other.resign("y")
    assert await one.leader() is None


# Membership, control messages, quarantines, schemas.


async def test_membership_changes_are_announced_on_the_control_stream(
    transport: Roles,
) -> None:
    c = transport.coordination("myproj.shop", "orders", GROUP)
    assert await c.members() == {}
    assert await c.control_tail() == b"0-0"
    start = await c.control_tail()
    members = await c.change_members(
        lambda m: {**m, "e1": Member(partitions=[0, 1], host="h", pid=7)}, "join", "e1"
    )
    assert members == await c.members()
    assert (await c.members())["e1"].partitions == [0, 1]
    await c.announce("released", "e1")
    position, messages = await c.control(start, 10)
    assert messages == [
        {"reason": "join", "executor": "e1"},
        {"reason": "released", "executor": "e1"},
    ]
    assert position == await c.control_tail()
    assert await c.control(position, 10) == (position, [])

    with pytest.raises(ValueError, match="broken"):
        await c.change_members(_broken, "broken", "x")
    assert await c.control(position, 10) == (position, [])


def _broken(members: dict) -> dict:
    raise ValueError("broken")


async def test_a_blocked_reader_is_woken_from_another_threads_loop(
    transport: Roles,
) -> None:
    """The ``delay_sync`` case: a write from a loop in another thread wakes a reader
    blocked in this one (no polling: the wait would otherwise last the whole block)."""
    p = part(0)
    c = transport.coordination("myproj.shop", "orders", GROUP)
    tail = await c.control_tail()
    control = asyncio.create_task(c.control(tail, 600_000))
    new = asyncio.create_task(transport.wait_for_new({p: None}, 600_000))
    await asyncio.sleep(0)

    def elsewhere() -> None:
        async def write() -> None:
            await c.announce("join", "e9")
            await transport.append([(p, {b"n": b"1"})])

        asyncio.run(write())

    thread = threading.Thread(target=elsewhere)
    thread.start()
    position, messages = await control
    assert messages == [{"reason": "join", "executor": "e9"}]
    assert await new is True
    thread.join()
    # Nothing newer than what is there: the wait times out (a short block).
    [xid] = [x for x, _ in await transport.scan(p, None, 10)]
    assert await transport.wait_for_new({p: xid}, 10) is False
    assert await c.control(position, 10) == (position, [])


async def test_quarantines_are_recorded_and_lifted(transport: Roles) -> None:
    c = transport.coordination("myproj.shop", "orders", GROUP)
    await c.quarantine(part(2), "1-0", "ValueError: bad")
    await c.quarantine(part(3), None, "KeyError: x")
    held = await c.quarantined()
    assert set(held) == {part(2), part(3)}
    assert (held[part(2)].id, held[part(2)].error) == ("1-0", "ValueError: bad")
    tail = await c.control_tail()
    assert await c.lift([part(2), part(5)], "cli") == [part(2)]
    assert set(await c.quarantined()) == {part(3)}
    assert (await c.control(tail, 10))[1] == [{"reason": "resume", "executor": "cli"}]
    assert await c.lift(None, "cli") == [part(3)]
    assert await c.quarantined() == {}


async def test_schema_store_adds_once_and_checks_under_the_lock(
    transport: Roles,
) -> None:
    store = transport.schema_store("myproj.shop", "orders")
    assert await store.all() == {}
    assert await store.add("f1", "s1", lambda stored: None) == {"f1": "s1"}

    def refuse(stored: object) -> None:
        raise ValueError("incompatible")

    with pytest.raises(ValueError, match="incompatible"):
        await store.add("f2", "s2", refuse)
    assert await store.add("f1", "other", refuse) == {"f1": "s1"}  # known: no check
    assert await transport.schema_store("myproj.shop", "orders").all() == {"f1": "s1"}


# Naming, and apps sharing a store.


@pytest.fixture
def store_name() -> Iterator[str]:
    name = f"t{uuid.uuid4().hex[:8]}"
    yield name
    servers.forget(name)


async def test_the_same_name_is_the_same_store_in_one_process(store_name: str) -> None:
    settings = Settings()
    one = Roles(backend_for(f"memory://{store_name}", settings))  # type: ignore[arg-type]
    two = Roles(backend_for(f"memory://{store_name}", settings))  # type: ignore[arg-type]
    other = Roles(backend_for("memory://other-" + store_name, settings))  # type: ignore[arg-type]
    assert isinstance(one.backend, MemoryBackend) and isinstance(other.backend, MemoryBackend)
    await one.append([(part(0), {b"n": b"1"})])
    assert await two.lengths([part(0)]) == {part(0): 1}
    assert await other.lengths([part(0)]) == {part(0): 0}
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


async def test_explicit_ids_all_or_none(transport: Roles) -> None:
    """``send(stream_ids=...)`` on memory://: ids kept as given; one too low sends nothing."""
    from runnel.exceptions import EntryIdError

    added = await transport.append(
        [(part(0), {b"n": b"1"}), (part(0), {b"n": b"2"})], ids=["5-1", "5-3"]
    )
    assert added == [b"5-1", b"5-3"]
    with pytest.raises(EntryIdError):
        await transport.append(
            [(part(1), {b"n": b"3"}), (part(0), {b"n": b"4"})], ids=["9-0", "5-3"]
        )
    assert await transport.lengths([part(0), part(1)]) == {part(0): 2, part(1): 0}
