"""SchemaStore: the writer schemas of one stream, added once, each addition checked
against what is stored, atomically with respect to other writers."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from runnel.store import Backend, Check
from tests.contract.support import STREAM


async def test_schema_store_adds_once_and_checks_under_the_lock(backend: Backend, app: str) -> None:
    store = backend.schema_store(app, STREAM)
    assert await store.all() == {}
    assert await store.add("f1", "s1", lambda stored: None) == {"f1": "s1"}

    def refuse(stored: object) -> None:
        raise ValueError("incompatible")

    with pytest.raises(ValueError, match="incompatible"):
        await store.add("f2", "s2", refuse)
    assert await store.add("f1", "other", refuse) == {"f1": "s1"}  # known: no check
    assert await backend.schema_store(app, STREAM).all() == {"f1": "s1"}


async def test_the_check_sees_what_is_stored_and_streams_are_apart(
    backend: Backend, app: str
) -> None:
    store = backend.schema_store(app, STREAM)
    seen: list[dict[str, str]] = []
    await store.add("f1", "s1", lambda stored: seen.append(dict(stored)))
    await store.add("f2", "s2", lambda stored: seen.append(dict(stored)))
    assert seen == [{}, {"f1": "s1"}]
    assert await store.all() == {"f1": "s1", "f2": "s2"}
    assert await backend.schema_store(app, "other").all() == {}


async def test_two_writers_at_once_cannot_both_add_incompatible_schemas(
    backend: Backend, app: str
) -> None:
    """Each writer refuses any schema but its own: only one of them can succeed."""

    def alone(fingerprint: str) -> Check:
        def check(stored: Mapping[str, str]) -> None:
            if set(stored) - {fingerprint}:
                raise ValueError(f"{fingerprint} is incompatible with {sorted(stored)}")

        return check

    writers = [backend.schema_store(app, STREAM) for _ in range(5)]
    results = await asyncio.gather(
        *(w.add(f"f{i}", f"s{i}", alone(f"f{i}")) for i, w in enumerate(writers)),
        return_exceptions=True,
    )
    added = [r for r in results if not isinstance(r, BaseException)]
    assert len(added) == 1, results
    assert all(isinstance(r, ValueError) for r in results if r not in added)
    assert await writers[0].all() == added[0]
