"""Leadership: one leader per app, by a claim that expires unless renewed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from runnel.store import Backend, Leadership
from tests.contract.support import LONG, MEDIUM, SHORT, Time, fresh_app


def nobody_leads(election: Leadership) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await election.leader() is None

    return check


async def test_leadership_claim_resign_and_leader(
    backend: Backend, app: str, store_time: Time
) -> None:
    election = backend.leadership(app)
    other = backend.leadership(app)
    assert await election.leader() is None
    assert await election.claim("a", LONG)
    assert not await other.claim("b", LONG)
    assert await other.leader() == "a"

    await other.resign("b")  # not the leader: nothing happens
    assert await election.leader() == "a"
    await election.resign("a")
    assert await election.leader() is None
    assert await other.claim("b", SHORT)
    assert not await election.claim("a", LONG)
    await store_time.until(nobody_leads(election), "b's claim expired")
    assert await election.leader() is None
    assert await election.claim("a", LONG)
    assert await election.leader() == "a"


async def test_leadership_expires_and_is_held_by_one(
    backend: Backend, app: str, store_time: Time
) -> None:
    one, other = backend.leadership(app), backend.leadership(app)
    assert await one.leader() is None
    assert await one.claim("x", MEDIUM)
    assert not await other.claim("y", MEDIUM)
    assert await one.claim("x", LONG)  # renewed
    # A claim made after the renewal, as long as the first: once it expired, the first
    # would have too, had it not been renewed.
    reference = backend.leadership(fresh_app())
    assert await reference.claim("r", MEDIUM)
    await store_time.until(nobody_leads(reference), "the reference claim expired")
    assert await other.leader() == "x"
    await other.resign("y")  # not y's to give up
    assert await other.leader() == "x"
    assert await one.claim("x", SHORT)  # renewed, for a short while
    await store_time.until(nobody_leads(other), "x's claim expired")
    assert await other.claim("y", LONG)
    await other.resign("y")
    assert await one.leader() is None


async def test_apps_have_a_leader_each(backend: Backend, app: str) -> None:
    mine, theirs = backend.leadership(app), backend.leadership(fresh_app())
    assert await mine.claim("a", LONG)
    assert await theirs.leader() is None
    assert await theirs.claim("b", LONG)
    assert (await mine.leader(), await theirs.leader()) == ("a", "b")
