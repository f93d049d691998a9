"""Coordination: membership, control messages, partition locks, heartbeats, quarantines.

Fenced reading and acknowledging are in test_fencing.py. Where a lock or a heartbeat must
expire, ``store_time`` lets the time pass (a manual clock on ``memory://``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from runnel.store import Backend, Coordination, Member, Members, PartitionId
from tests.contract.support import GROUP, HANG_GUARD, LONG, MEDIUM, SHORT, STREAM, Time, part


def coordination(backend: Backend, app: str) -> Coordination:
    return backend.coordination(app, STREAM, GROUP)


async def free(c: Coordination, p: PartitionId) -> bool:
    return (await c.lock_owners([p]))[p] is None


# Locks and heartbeats.


async def test_acquire_takes_free_locks_refreshes_own_and_refuses_others(
    backend: Backend, app: str, store_time: Time
) -> None:
    c = coordination(backend, app)
    p = [part(app, n) for n in range(8)]
    assert await c.acquire("a", p[0:3], LONG) == {p[0], p[1], p[2]}
    assert await c.acquire("b", p[1:4], LONG) == {p[3]}
    assert await c.acquire("b", [], LONG) == set()

    # Our own lock is refreshed (5: from SHORT to LONG, 6 keeps SHORT)...
    assert await c.acquire("a", [p[5]], SHORT) == {p[5]}
    assert await c.acquire("a", [p[5]], LONG) == {p[5]}
    assert await c.acquire("x", [p[6]], SHORT) == {p[6]}
    # ...someone else's is neither taken nor extended.
    assert await c.acquire("a", [p[7]], SHORT) == {p[7]}
    assert await c.acquire("b", [p[7]], LONG) == set()
    assert await c.lock_owners([p[7]]) == {p[7]: "a"}
    await store_time.until(lambda: free(c, p[7]), "a's short lock expired, b's ask left it so")
    await store_time.until(lambda: free(c, p[6]), "x's short lock expired")
    assert await c.lock_owners([p[5]]) == {p[5]: "a"}

    assert await c.lock_owners(p[:5]) == {p[0]: "a", p[1]: "a", p[2]: "a", p[3]: "b", p[4]: None}

    # Release deletes only what the caller holds.
    await c.release("a", [p[0], p[3]])
    assert await c.lock_owners(p[:4]) == {p[0]: None, p[1]: "a", p[2]: "a", p[3]: "b"}
    await c.release("b", p[1:4])
    assert await c.lock_owners(p[:4]) == {p[0]: None, p[1]: "a", p[2]: "a", p[3]: None}
    await c.release("a", [])
    assert await c.lock_owners(p[:4]) == {p[0]: None, p[1]: "a", p[2]: "a", p[3]: None}

    # A released lock is free for anyone.
    assert await c.acquire("b", [p[0], p[1], p[3]], LONG) == {p[0], p[3]}


async def test_beat_refreshes_the_heartbeat_and_reports_the_locks_still_ours(
    backend: Backend, app: str, store_time: Time
) -> None:
    c = coordination(backend, app)
    p = [part(app, n) for n in range(4)]
    assert await c.acquire("a", [p[0]], MEDIUM) == {p[0]}
    assert await c.acquire("a", [p[1]], LONG) == {p[1]}
    assert await c.acquire("b", [p[2]], MEDIUM) == {p[2]}
    assert await c.alive(["a", "b"]) == set()

    assert await c.beat("a", p, LONG) == {p[0], p[1]}
    # A beat takes no free lock.
    assert await c.lock_owners(p) == {p[0]: "a", p[1]: "a", p[2]: "b", p[3]: None}
    assert await c.alive(["a", "b", "nobody"]) == {"a"}
    # b's lock was left alone (it expires); ours was extended.
    await store_time.until(lambda: free(c, p[2]), "b's lock expired")
    assert await c.lock_owners([p[0]]) == {p[0]: "a"}

    # A lock someone else took meanwhile is reported as no longer ours.
    assert await c.acquire("a", [p[1]], SHORT) == {p[1]}
    await store_time.until(lambda: free(c, p[1]), "a's lock on 1 expired")
    assert await c.acquire("b", [p[1]], LONG) == {p[1]}
    assert await c.beat("a", [p[0], p[1]], LONG) == {p[0]}
    assert await c.beat("a", [], LONG) == set()

    # alive() follows heartbeat expiry.
    assert await c.beat("b", [], LONG) == set()
    assert await c.alive(["a", "b"]) == {"a", "b"}
    assert await c.alive([]) == set()
    await c.beat("b", [], SHORT)  # a short ttl: b stops beating now

    async def b_expired() -> bool:
        return await c.alive(["a", "b"]) == {"a"}

    await store_time.until(b_expired, "b's heartbeat expired")
    await c.beat("b", [p[2]], LONG)  # beating again: alive again
    assert await c.alive(["a", "b"]) == {"a", "b"}


async def test_locks_expire_unless_beaten_and_release_only_our_own(
    backend: Backend, app: str, store_time: Time
) -> None:
    p0, p1 = part(app, 0), part(app, 1)
    c = coordination(backend, app)
    assert await c.acquire("a", [p0, p1], MEDIUM) == {p0, p1}
    assert await c.alive(["a"]) == set()
    assert await c.beat("a", [p0], LONG) == {p0}  # extends p0 only
    assert await c.alive(["a", "b"]) == {"a"}
    await store_time.until(lambda: free(c, p1), "p1's lock expired")
    assert await c.lock_owners([p0, p1]) == {p0: "a", p1: None}
    assert await c.beat("a", [p0, p1], LONG) == {p0}  # a beat takes no free lock
    await c.release("b", [p0])
    assert await c.lock_owners([p0]) == {p0: "a"}
    await c.release("a", [p0])
    assert await c.lock_owners([p0]) == {p0: None}
    await c.beat("a", [], SHORT)

    async def a_expired() -> bool:
        return await c.alive(["a"]) == set()

    await store_time.until(a_expired, "a's heartbeat expired")


# Membership and control messages.


async def test_membership_changes_are_announced_on_the_control_stream(
    backend: Backend, app: str
) -> None:
    c = coordination(backend, app)
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


def _broken(members: Members) -> Members:
    raise ValueError("broken")


async def test_change_members_is_serialized(backend: Backend, app: str) -> None:
    c = coordination(backend, app)
    assert await c.members() == {}
    start = await c.control_tail()

    def append(i: int) -> Callable[[Members], Members]:
        def change(members: Members) -> Members:
            log = members.get("log", Member())
            return {**members, "log": Member(partitions=[*log.partitions, i])}

        return change

    # 20 concurrent read-modify-writes: without serializing most appends would be lost.
    results = await asyncio.gather(
        *(c.change_members(append(i), f"reason{i}", f"e{i}") for i in range(20))
    )
    for i, members in enumerate(results):
        assert members["log"].partitions[-1] == i  # each call returns its own result
    members = await c.members()
    assert sorted(members["log"].partitions) == list(range(20))

    # One control message per change.
    position, messages = await c.control(start, 50)
    assert len(messages) == 20
    assert {(m["reason"], m["executor"]) for m in messages} == {
        (f"reason{i}", f"e{i}") for i in range(20)
    }

    # A failing change writes nothing and announces nothing.
    def broken(members: Members) -> Members:
        raise ValueError("broken change")

    with pytest.raises(ValueError, match="broken change"):
        await c.change_members(broken, "broken", "x")
    assert await c.members() == members
    assert await c.control(position, 50) == (position, [])
    # ...and serializing goes on (whatever guards it was given back).
    assert (await c.change_members(append(99), "after", "x"))["log"].partitions[-1] == 99


async def test_members_keep_fields_they_do_not_know(backend: Backend, app: str) -> None:
    c = coordination(backend, app)
    member = Member(partitions=[3], worker="w1", extra={"zone": "eu", "weight": 2})
    await c.change_members(lambda m: {"e1": member}, "join", "e1")
    assert await c.members() == {"e1": member}


async def test_control_returns_the_messages_after_a_position(backend: Backend, app: str) -> None:
    c = coordination(backend, app)
    assert await c.control_tail() == b"0-0"
    assert await c.control(b"0-0", 50) == (b"0-0", [])

    await c.announce("join", "e1")
    first = await c.control_tail()
    await c.change_members(lambda m: {**m, "e2": Member()}, "leave", "e2")
    second = await c.control_tail()
    assert first != second

    assert await c.control(b"0-0", 50) == (
        second,
        [{"reason": "join", "executor": "e1"}, {"reason": "leave", "executor": "e2"}],
    )
    assert await c.control(first, 50) == (second, [{"reason": "leave", "executor": "e2"}])
    assert await c.control(second, 50) == (second, [])

    # A blocked reader gets a message announced while it waits.
    waiting = asyncio.create_task(c.control(second, 5_000))
    await asyncio.sleep(0.05)
    await c.announce("dead", "e3")
    async with asyncio.timeout(HANG_GUARD):
        position, messages = await waiting
    assert messages == [{"reason": "dead", "executor": "e3"}]
    assert position == await c.control_tail()


async def test_processors_have_their_own_coordination(backend: Backend, app: str) -> None:
    one, other = coordination(backend, app), backend.coordination(app, STREAM, "other")
    p = part(app, 0)
    assert await one.acquire("a", [p], LONG) == {p}
    assert await other.acquire("b", [p], LONG) == {p}
    await one.change_members(lambda m: {"e1": Member()}, "join", "e1")
    assert await other.members() == {}
    assert await other.control_tail() == b"0-0"


# Quarantines.


async def test_quarantines_are_recorded_and_lifted(backend: Backend, app: str) -> None:
    c = coordination(backend, app)
    await c.quarantine(part(app, 2), "1-0", "ValueError: bad")
    await c.quarantine(part(app, 3), None, "KeyError: x")
    held = await c.quarantined()
    assert set(held) == {part(app, 2), part(app, 3)}
    assert (held[part(app, 2)].id, held[part(app, 2)].error) == ("1-0", "ValueError: bad")
    assert (held[part(app, 3)].id, held[part(app, 3)].error) == (None, "KeyError: x")
    tail = await c.control_tail()
    assert await c.lift([part(app, 2), part(app, 5)], "cli") == [part(app, 2)]
    assert set(await c.quarantined()) == {part(app, 3)}
    assert (await c.control(tail, 10))[1] == [{"reason": "resume", "executor": "cli"}]
    assert await c.lift(None, "cli") == [part(app, 3)]
    assert await c.quarantined() == {}
