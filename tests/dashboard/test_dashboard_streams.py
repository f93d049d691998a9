"""The streams views in real headless Chromium, over what a real worker process caused:
dead letters its failing processor forwarded (more than the page lists), a partition it
quarantined on a poison event, and events trimmed before a processor read them.

Each view must show exactly that; the action buttons follow the page's contract
(data-action, data-args, data-confirm) and appear only with --allow-actions.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runnel.admin.dead_letters import Selection, stream_dead_letters
from runnel_dashboard.streams import DEAD_SHOWN
from tests.dashboard.test_dashboard import rows
from tests.support.dashboard import Dashboard, import_file, run_then_close
from tests.support.processes import WorkerProcess, env_with, wait_for

MODULE = "streamsapp"
TARGET = f"{MODULE}:app"
DEAD = DEAD_SHOWN + 5  # more than the page lists: the count must still say all

SOURCE = """
from runnel import App, Record
from runnel.middleware.dead_letter import DeadLetterMiddleware

app = App(name={name!r}, default_join_delay=0, default_grace_period=2)


class Order(Record):
    key: str
    n: int


orders = app.stream("orders", record=Order, partition_by="key", partition_count=2)
pings = app.stream("pings", record=Order, partition_by="key", partition_count=2)
lossy = app.stream(
    "lossy", record=Order, partition_by="key", partition_count=1, partition_size=10,
    on_full="drop_oldest",
)


@app.processor(orders, exception_policy="ignore", middleware=[DeadLetterMiddleware(orders)])
async def check(events):
    async for order in events.records():
        if order.n < 0:
            raise ValueError(f"bad {{order.n}}")


@app.processor(pings, exception_policy="quarantine")
async def guard(events):
    async for ping in events.records():
        if ping.n < 0:
            raise ValueError(f"poison {{ping.n}}")


@app.processor(lossy)
async def late(events):
    async for _ in events:
        pass
"""


@pytest.fixture
def module(
    tmp_path: Path, app_name: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> ModuleType:
    monkeypatch.setenv("RUNNEL_REDIS_URL", redis_url)
    path = tmp_path / f"{MODULE}.py"
    path.write_text(textwrap.dedent(SOURCE.format(name=app_name)))
    mod = import_file(path, f"{MODULE}_{app_name}")
    return mod


run = run_then_close


def dead_letters(mod: ModuleType) -> list[Any]:
    return run(mod, lambda: stream_dead_letters(Selection(mod.orders, None, None, None, None)))


def quarantined(mod: ModuleType) -> dict[Any, Any]:
    return run(
        mod, lambda: mod.app.store.coordination(mod.app.name, "pings", "guard").quarantined()
    )


READ = """
return [...document.querySelectorAll(arguments[0])].map((row) => ({
  id: row.dataset.id,
  cells: [...row.querySelectorAll(":scope > td")].map((td) => td.innerText),
  buttons: [...row.querySelectorAll("button[data-action]")].map((b) => ({
    action: b.dataset.action, args: JSON.parse(b.dataset.args), confirm: b.dataset.confirm,
  })),
}));
"""


def read(driver: Any, selector: str) -> list[dict[str, Any]]:
    """The rows matching ``selector``, read at one moment (the views redraw while a test
    looks): their data-id, cell texts and action buttons."""
    return list(driver.execute_script(READ, selector))


def test_dead_letters_quarantines_and_lost_events_are_shown(
    module: ModuleType, tmp_path: Path, redis_url: str, browser: Any
) -> None:
    mod = module

    async def lose() -> None:  # before any worker: 50 sent, 10 kept, 40 lost unread
        await mod.app.store.log.ensure_group([mod.lossy.partitions[0].id], "late")
        for n in range(50):
            await mod.lossy.send(mod.Order(key="k", n=n))

    run(mod, lose)
    env = env_with(redis_url)
    with WorkerProcess(TARGET, tmp_path, env) as worker:

        async def fail() -> list[bytes]:
            for n in range(DEAD):
                await mod.orders.send(mod.Order(key=f"k{n % 4}", n=-1 - n))
            return await mod.pings.send(mod.Order(key="a", n=-1))

        [poison] = run(mod, fail)
        wait_for(lambda: len(dead_letters(mod)) == DEAD, timeout=120)
        [(where, why)] = wait_for(lambda: list(quarantined(mod).items()))
        # The oldest, grouped by partition on the page, each group in the sink's order.
        oldest = dead_letters(mod)[:DEAD_SHOWN]
        letters = sorted(oldest, key=lambda x: x.partition.number if x.partition else 99)

        dashboard = Dashboard(TARGET, tmp_path, env, "--allow-actions")
        try:
            browser.get(dashboard.url)
            wait_for(lambda: rows(browser, ".stream-dead-letters[data-stream=orders]"))
            [card] = browser.execute_script(
                "return [...document.querySelectorAll('.stream-dead-letters[data-stream=orders]')]"
                ".map((c) => [c.dataset.count, c.querySelector('h3').innerText])"
            )
            assert card == [
                str(DEAD),
                f"dead letters of orders {DEAD} in dead.orders, the oldest {DEAD_SHOWN} shown",
            ]
            shown = read(browser, "tr.stream-dead[data-stream=orders]")
            assert [r["id"] for r in shown] == [x.id.decode() for x in letters]
            for row, letter in zip(shown, letters, strict=True):
                number, sink_id, source_id, proc, failed, error, _ = row["cells"]
                assert letter.partition is not None
                assert number == str(letter.partition.number)
                assert (sink_id, source_id, proc) == (letter.id.decode(), letter.source_id, "check")
                assert failed == letter.failed_at.isoformat(timespec="seconds")
                assert error == letter.error and error.startswith("ValueError: bad -")
                args = {"stream": "orders", "partition": letter.partition.number, "ids": [sink_id]}
                [replay, purge] = row["buttons"]
                assert (replay["action"], replay["args"]) == ("stream-dead-replay", args)
                assert (purge["action"], purge["args"]) == ("stream-dead-purge", args)
                assert sink_id in purge["confirm"]
            # One button per partition replays (or purges) the letters listed of it.
            [tools] = read(browser, ".stream-dead-letters[data-stream=orders] .tools")
            listed = {
                b["args"]["partition"]: b["args"]["ids"]
                for b in tools["buttons"]
                if b["action"] == "stream-dead-replay"
            }
            numbers = {x.partition.number for x in letters if x.partition is not None}
            assert listed == {
                p: [x.id.decode() for x in letters if x.partition and x.partition.number == p]
                for p in numbers
            }

            [row] = read(browser, "tr.quarantined")
            proc, stream, number, failing, since, error, _ = row["cells"]
            assert (proc, stream, number) == ("guard", "pings", str(where.number))
            assert (failing, error) == (poison.decode(), "ValueError: poison -1")
            assert (failing, error) == (why.id, why.error)
            assert since == _iso(why.since) + "Z"
            args = {"processor": "guard", "stream": "pings", "partition": where.number}
            assert [(b["action"], b["args"]) for b in row["buttons"]] == [
                ("partition-skip", {**args, "id": poison.decode()}),
                ("partition-resume", args),
            ]

            failures = {r["cells"][0]: r["cells"][2:] for r in read(browser, "tr.failures")}
            assert failures == {
                "check": ["IGNORE", str(DEAD), "0", "0"],
                "guard": ["QUARANTINE", "-", "1", "0"],
                "late": ["HALT", "-", "0", "40"],
            }
            [lost] = read(browser, "tr.lost-events")
            assert lost["cells"] == ["late", "lossy", "0", "40", "10"]
        finally:
            dashboard.close()

        # Read-only: the same views, not one action button.
        dashboard = Dashboard(TARGET, tmp_path, env)
        try:
            browser.get(dashboard.url)
            wait_for(lambda: rows(browser, "#streams-section[data-loaded=yes]"))
            assert len(read(browser, "tr.stream-dead")) == DEAD_SHOWN
            assert read(browser, "tr.quarantined")
            assert not rows(browser, "#streams-section button")
        finally:
            dashboard.close()
        worker.stop()


def _iso(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).isoformat()[:19]
