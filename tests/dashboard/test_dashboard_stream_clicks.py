"""The stream actions clicked in a real browser: a real worker process forwards dead
letters of one stream and quarantines two partitions of another; headless Chromium loads
a real `runnel dashboard --allow-actions --audit-log` process and clicks the buttons of
the streams views.

Each button, its confirmation accepted, does what it says, as the store (and `runnel dead
list`) then tells, with a line in the audit log naming who did it; a confirmation
dismissed sends nothing and changes nothing.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis

from runnel.admin.dead_letters import Selection, stream_dead_letters
from tests.support.dashboard import Dashboard, import_file, run_then_close
from tests.support.processes import WorkerProcess, cli, env_with, wait_for

MODULE = "clicksapp"
TARGET = f"{MODULE}:app"

SOURCE = """
import os

import redis

from runnel import App, Record
from runnel.middleware.dead_letter import DeadLetterMiddleware

app = App(name={name!r}, default_join_delay=0, default_grace_period=2)
_client = redis.Redis.from_url(os.environ["RUNNEL_REDIS_URL"])


class Ping(Record):
    key: str
    n: int


pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
pokes = app.stream("pokes", record=Ping, partition_by="key", partition_count=2)


@app.processor(pings, exception_policy="ignore", middleware=[DeadLetterMiddleware(pings)])
async def a(events):
    async for ping in events.records():
        if ping.n < 0 and not _client.exists("cured"):
            raise ValueError(f"bad {{ping.n}}")
        _client.rpush("seen", f"{{ping.key}}:{{ping.n}}")


@app.processor(pokes, exception_policy="quarantine")
async def q(events):
    async for poke in events.records():
        if poke.n < 0 and not _client.exists("cured", f"cured{{poke.n}}"):
            raise ValueError(f"poison {{poke.n}}")
        _client.rpush("poked", f"{{poke.key}}:{{poke.n}}")
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


def letters(mod: ModuleType) -> dict[str, tuple[int | None, str]]:
    """The dead letters of pings in the store: sink id -> (partition, original id)."""
    found = run(mod, lambda: stream_dead_letters(Selection(mod.pings, None, None, None, None)))
    return {
        x.id.decode(): (x.partition.number if x.partition else None, x.source_id) for x in found
    }


def quarantined(mod: ModuleType) -> dict[int, str | None]:
    """The quarantined partitions of q: number -> the id of the event it stopped on."""
    found = run(mod, lambda: mod.app.store.coordination(mod.app.name, "pokes", "q").quarantined())
    return {p.number: why.id for p, why in found.items()}


def keys(stream: Any, record: Any) -> tuple[str, str]:
    """Two keys, the first routed to partition 0 of ``stream``, the second to 1."""
    by_number: dict[int, str] = {}
    for i in range(100):
        by_number.setdefault(stream.partition_for(record(key=f"k{i}", n=0)).number, f"k{i}")
    return by_number[0], by_number[1]


FIND = """
const [selector, partition] = arguments;
return [...document.querySelectorAll(selector)].find(
  (b) => partition === null || JSON.parse(b.dataset.args).partition === partition,
) || null;
"""


class Page:
    """The dashboard in the browser: find a button, click it, answer its confirmation."""

    def __init__(self, driver: Any, url: str) -> None:
        self.driver = driver
        driver.get(url)
        wait_for(lambda: driver.execute_script(self._loaded))

    _loaded = "return document.getElementById('streams-section').dataset.loaded === 'yes'"
    _outcome = "return document.getElementById('outcome').textContent"

    def click(self, selector: str, partition: int | None, *named: str) -> Any:
        """Click the button (of args naming ``partition``, if given); its confirmation,
        which names ``named``, left open (the page's scripts wait while it is)."""
        from selenium.common.exceptions import (
            NoAlertPresentException,
            StaleElementReferenceException,
        )

        driver = self.driver
        driver.execute_script("document.getElementById('outcome').textContent = ''")

        def clicked() -> bool:  # the views redraw every few seconds: find it afresh
            found = driver.execute_script(FIND, selector, partition)
            if found is None:
                return False
            try:
                found.click()
            except StaleElementReferenceException:
                return False
            return True

        def alert() -> Any:
            try:
                return driver.switch_to.alert
            except NoAlertPresentException:
                return None

        wait_for(clicked)
        box = wait_for(alert)
        for name in named:
            assert name in box.text, box.text
        return box

    def accept(self, box: Any) -> str:
        """Accept the confirmation: the outcome the page then shows."""
        box.accept()
        return str(wait_for(lambda: self.driver.execute_script(self._outcome)))

    def act(self, selector: str, partition: int | None, *named: str) -> str:
        return self.accept(self.click(selector, partition, *named))

    def dismiss(self, selector: str, partition: int | None, *named: str) -> None:
        self.click(selector, partition, *named).dismiss()


def test_every_stream_action_clicked_from_the_page(
    module: ModuleType, tmp_path: Path, redis_url: str, redis_client: redis.Redis, browser: Any
) -> None:
    mod, client = module, redis_client
    env = env_with(redis_url)
    zero, one = keys(mod.pings, mod.Ping)
    with WorkerProcess(TARGET, tmp_path, env) as worker:

        async def fail() -> tuple[bytes, bytes]:
            await mod.pings.send(
                *(mod.Ping(key=k, n=n) for k, n in ((zero, -1), (one, -2), (zero, -3), (one, -4)))
            )
            [_, stop_zero, _] = await mod.pokes.send(*(mod.Ping(key=zero, n=n) for n in (1, -5, 2)))
            [stop_one, _] = await mod.pokes.send(*(mod.Ping(key=one, n=n) for n in (-6, 3)))
            return stop_zero, stop_one

        poison_zero, poison_one = run(mod, fail)
        wait_for(lambda: len(letters(mod)) == 4)
        wait_for(lambda: quarantined(mod) == {0: poison_zero.decode(), 1: poison_one.decode()})
        client.set("cured", 1)  # what runs from now on succeeds
        before = letters(mod)
        first = next(i for i, (number, _) in before.items() if number == 0)
        stored = [client.xlen(f"__strm:{mod.app.name}.pings.{n}") for n in range(2)]

        audit = tmp_path / "audit.jsonl"
        board = Dashboard(TARGET, tmp_path, env, "--allow-actions", "--audit-log", str(audit))
        try:
            page = Page(browser, board.url)
            letter = f"tr.stream-dead[data-stream=pings][data-id='{first}'] "
            tools = ".stream-dead-letters[data-stream=pings] .tools "
            skip = "tr.quarantined[data-processor=q] button[data-action=partition-skip]"
            resume = "tr.quarantined[data-processor=q] button[data-action=partition-resume]"

            # Dismissed: nothing sent, nothing changed.
            page.dismiss(letter + "button.replay", None, first)
            page.dismiss(tools + "button.purge", 1, "partition 1 of pings")
            page.dismiss(skip, 0, poison_zero.decode())
            page.dismiss(resume, 1, "partition 1 of q")
            assert letters(mod) == before
            assert quarantined(mod) == {0: poison_zero.decode(), 1: poison_one.decode()}

            # (1) One letter replayed: out of the sink, its event back in partition 0 and
            # run again (cured now).
            said = page.act(letter + "button.replay", None, first)
            assert said == "replayed 1 dead letter of pings"
            after = letters(mod)
            assert first not in after and after == {i: x for i, x in before.items() if i != first}
            listed = cli("dead", "list", f"{MODULE}:pings", cwd=tmp_path, env=env)
            assert listed.returncode == 0, listed.stderr
            assert first not in listed.stdout and len(listed.stdout.splitlines()) == 3
            partition = f"__strm:{mod.app.name}.pings.0"
            assert client.xlen(partition) == stored[0] + 1
            [(_, fields)] = client.xrevrange(partition, count=1)
            assert b"-1" in b"".join(fields.values())
            wait_for(lambda: client.lrange("seen", 0, -1) == [f"{zero}:-1".encode()])

            # (2) Partition 1's letters purged: gone; partition 0's other one kept.
            said = page.act(tools + "button.purge", 1, "2 dead letters of partition 1")
            assert said == "purged 2 dead letters of pings"
            assert [number for number, _ in letters(mod).values()] == [0]
            assert client.xlen(f"__strm:{mod.app.name}.pings.1") == stored[1]

            # (3) Skip on partition 0: lifted, its poison event never run, the next one is.
            said = page.act(skip, 0, poison_zero.decode())
            assert (
                said == f"skipped {poison_zero.decode()} on partition 0 of q; the partition resumes"
            )
            wait_for(lambda: f"{zero}:2".encode() in client.lrange("poked", 0, -1))
            assert quarantined(mod) == {1: poison_one.decode()}
            # Resume on partition 1: lifted, its failing event tried again (and now runs).
            said = page.act(resume, 1, "partition 1 of q")
            assert said == "resumed partition 1 of q"
            wait_for(lambda: f"{one}:3".encode() in client.lrange("poked", 0, -1))
            assert quarantined(mod) == {}
        finally:
            board.close()
        assert worker.stop() == 0
    poked = [x.decode() for x in client.lrange("poked", 0, -1)]
    assert sorted(poked) == sorted([f"{zero}:1", f"{zero}:2", f"{one}:-6", f"{one}:3"])
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [(x["action"], x["outcome"]) for x in lines] == [
        ("stream-dead-replay", "done"),
        ("stream-dead-purge", "done"),
        ("partition-skip", "done"),
        ("partition-resume", "done"),
    ]
    assert {(x["who"], x["client"]) for x in lines} == {("local", "127.0.0.1")}
    assert lines[0]["target"] == {"stream": "pings", "partition": 0, "ids": [first]}
    assert lines[2]["target"] == {
        "processor": "q",
        "stream": "pokes",
        "partition": 0,
        "id": poison_zero.decode(),
    }


def test_a_skip_confirmed_after_the_partition_stopped_elsewhere_skips_nothing(
    module: ModuleType, tmp_path: Path, redis_url: str, redis_client: redis.Redis, browser: Any
) -> None:
    """The confirmation names the event to skip; if, while it is open, the partition is
    resumed and stops on another event, accepting it must not skip that other one."""
    mod, client = module, redis_client
    env = env_with(redis_url)
    zero, _ = keys(mod.pokes, mod.Ping)
    with WorkerProcess(TARGET, tmp_path, env) as worker:
        first, then, _ = run(
            mod, lambda: mod.pokes.send(*(mod.Ping(key=zero, n=n) for n in (-5, -7, 2)))
        )
        wait_for(lambda: quarantined(mod) == {0: first.decode()})
        audit = tmp_path / "audit.jsonl"
        board = Dashboard(TARGET, tmp_path, env, "--allow-actions", "--audit-log", str(audit))
        try:
            page = Page(browser, board.url)
            skip = "tr.quarantined[data-processor=q] button[data-action=partition-skip]"
            box = page.click(skip, 0, first.decode())
            client.set("cured-5", 1)  # the first poison event now runs; the next one fails
            done = cli(
                "processor", "resume", f"{MODULE}:q", "--partition", "0", cwd=tmp_path, env=env
            )
            assert done.returncode == 0, done.stderr
            wait_for(lambda: quarantined(mod) == {0: then.decode()})
            said = page.accept(box)
            assert said.startswith(f"partition-skip refused: {first.decode()} is not the first")
            assert said.endswith("nothing skipped")
            assert quarantined(mod) == {0: then.decode()}
            # The page redrew: its button now names the event the partition stopped on.
            said = page.act(skip, 0, then.decode())
            assert said == f"skipped {then.decode()} on partition 0 of q; the partition resumes"
            wait_for(lambda: f"{zero}:2".encode() in client.lrange("poked", 0, -1))
        finally:
            board.close()
        assert worker.stop() == 0
    assert [x.decode() for x in client.lrange("poked", 0, -1)] == [f"{zero}:-5", f"{zero}:2"]
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [(x["action"], x["outcome"], x["who"]) for x in lines] == [
        ("partition-skip", "refused", "local"),
        ("partition-skip", "done", "local"),
    ]
