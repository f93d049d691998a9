"""docs/cli.md's sessions about a poison event: ``runnel dead list`` and ``replay`` of the
dead letter a real worker forwarded, and ``runnel processor skip`` of the event a
partition is quarantined on. The event is written with the page's own entry id,
1714557600000-0, on partition 3 (tests/cli/test_doc_sessions.py lists these as run here).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import redis

from tests.cli.test_doc_sessions import normalised, session, steps
from tests.support.processes import WorkerProcess, cli, env_with, wait_for

SHOP = """
from runnel import App, Record
from runnel.middleware.dead_letter import DeadLetterMiddleware

app = App(name="shop")


class Order(Record):
    order_id: int
    customer: str
    amount: float


orders = app.stream("orders", record=Order, partition_by="customer", partition_count=4)


@app.processor(orders, exception_policy="quarantine")
async def totals(events):
    async for order in events.records():
        if order.amount < 0:
            raise ValueError("bad amount")


@app.processor(orders, exception_policy="ignore", middleware=[DeadLetterMiddleware(orders)])
async def audit(events):
    async for order in events.records():
        if order.amount < 0:
            raise ValueError("bad amount")
"""

POISON = "1714557600000-0"


def failure_times(text: str) -> str:
    return re.sub(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", "TIME", text)


def play(heading: str, cwd: Path, redis_url: str) -> None:
    for env, args, shown in steps(session(("cli.md", heading, 0)).body):
        done = cli(*args, cwd=cwd, env=env_with(redis_url, **env))
        assert done.returncode == 0, done.stderr
        printed = normalised(failure_times(done.stdout + done.stderr))
        assert printed == normalised(failure_times(shown)), args


def quarantined(cwd: Path, redis_url: str) -> dict[int, str]:
    done = cli("status", "shop:app", "--json", cwd=cwd, env=env_with(redis_url))
    assert done.returncode == 0, done.stderr
    found = {}
    for processor in json.loads(done.stdout)["processors"]:
        for p in processor["partitions"]:
            if p["state"] == "QUARANTINED":
                found[p["number"]] = p["failing_id"]
    return found


def test_a_poison_event_dead_lettered_and_skipped(tmp_path: Path, redis_url: str) -> None:
    (tmp_path / "shop.py").write_text(SHOP)
    client = redis.Redis.from_url(redis_url)
    order = {"order_id": 7, "customer": "ada", "amount": -5.0}
    client.xadd("__strm:shop.orders.3", {"data": json.dumps(order)}, id=POISON)
    worker = WorkerProcess("shop:app", tmp_path, env_with(redis_url))
    try:
        wait_for(lambda: quarantined(tmp_path, redis_url) == {3: POISON})
        wait_for(lambda: client.xlen("__strm:shop.dead.orders.0") == 1)
        play("runnel dead list", tmp_path, redis_url)
        play("runnel processor skip", tmp_path, redis_url)
    finally:
        assert worker.stop() == 0, worker.output
        client.close()
