"""The dashboard's history on every store: one sample per time bucket, written once
however many dashboards try, capped, and read back from a time on."""

from __future__ import annotations

import pytest

from runnel.store import Backend, LogAdmin
from runnel.store.log import trim_slack

history = pytest.importorskip("runnel_dashboard.history")


async def test_a_bucket_is_written_once(backend: Backend, app: str, admin: LogAdmin) -> None:
    assert await history.write(backend, app, 5_000, {"n": 1}, keep=10)
    # A second dashboard writing the same bucket, or an earlier one, is refused.
    assert not await history.write(backend, app, 5_000, {"n": 2}, keep=10)
    assert not await history.write(backend, app, 4_000, {"n": 3}, keep=10)
    assert await history.write(backend, app, 6_000, {"n": 4}, keep=10)
    found = await history.read(backend, app, 0)
    assert [(s["at"], s["n"]) for s in found] == [(5.0, 1), (6.0, 4)]
    assert [(s["at"], s["n"]) for s in await history.read(backend, app, 6)] == [(6.0, 4)]


async def test_the_cap_holds(backend: Backend, app: str, admin: LogAdmin) -> None:
    keep = 20
    for n in range(keep * 4):
        assert await history.write(backend, app, 1_000 * (n + 1), {"n": n}, keep=keep)
        [length] = (await admin.lengths([history.partition(app)])).values()
        assert length <= keep + trim_slack(keep) == history.bound(1.0, keep / 3600)
    found = await history.read(backend, app, 0)
    assert keep <= len(found) <= keep + trim_slack(keep)
    assert found[-1]["n"] == keep * 4 - 1  # the newest are kept, the oldest went
    assert [s["n"] for s in found] == list(range(keep * 4 - len(found), keep * 4))
