"""One master of a 3-master cluster at ``maxmemory`` with ``noeviction``: a send to a
partition on it raises StoreFull; a send over partitions of every master raises
PartlySent naming what went in; `runnel send` and `runnel sendmany` print one `Error:`
line. The master's memory settings are restored after the test."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from runnel.exceptions import PartlySent, StoreFull
from tests.support.redis_cluster import Node
from tests.support.spread import SpreadApp, spread_fixture

APP = """
from runnel import App, Record

app = App(name={name!r})


class Ping(Record):
    key: str
    n: int


pings = app.stream("pings", record=Ping, partition_by="key", partition_count={partitions})
"""


spread = spread_fixture(APP, "fullapp")


@contextlib.contextmanager
def full(node: Node) -> Iterator[None]:
    """``node`` refuses writes (maxmemory below what it uses, noeviction) until closed."""
    with node.client() as client:
        before = {k: client.config_get(k)[k] for k in ("maxmemory", "maxmemory-policy")}
        used = int(client.info("memory")["used_memory"])
    node.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
    node.command("CONFIG", "SET", "maxmemory", str(used // 2))
    try:
        yield
    finally:
        for key, value in before.items():
            node.command("CONFIG", "SET", key, value)


def sent_ids(spread: SpreadApp, records: list[dict[str, Any]]) -> list[Any]:
    """Send ``records`` in one batch through the app; its entry ids."""
    mod = spread.module

    async def go() -> list[Any]:
        try:
            return list(await mod.pings.send(*(mod.Ping(**r) for r in records)))
        finally:
            await mod.app.aclose()

    return asyncio.run(go())


def one_error_line(done: Any, *words: str) -> str:
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("Error:"), done.stderr
    for word in words:
        assert word in err, err
    return err


def test_a_full_master_refuses_its_partitions_sends(spread: SpreadApp) -> None:
    keys = spread.key_per_master()
    full_port, (full_key, full_partition) = next(iter(keys.items()))
    others = [(key, n) for port, (key, n) in keys.items() if port != full_port]
    records = [{"key": key, "n": i} for i, (key, _) in enumerate(keys.values())]
    with full(spread.cluster.node(full_port)):
        with pytest.raises(StoreFull, match="out of memory"):
            sent_ids(spread, [{"key": full_key, "n": 1}])
        # The other masters take theirs; the error says which records are in.
        with pytest.raises(PartlySent) as partly:
            sent_ids(spread, records)
        ids = partly.value.ids
        full_index = list(keys).index(full_port)
        assert ids[full_index] is None
        assert all(ids[i] is not None for i in range(len(records)) if i != full_index)
        message = str(partly.value)
        written = {0: "1-2", 1: "0, 2", 2: "0-1"}[full_index]
        assert f"2 of 3 records are in Redis (indexes {written})" in message
        assert "were not written" in message and "out of memory" in message.lower()
        master = f"{spread.partition_key(full_partition)} on master 127.0.0.1:{full_port}"
        assert master in message
        assert isinstance(partly.value.__cause__, StoreFull)

        done = spread.run("send", spread.target("pings"), json.dumps({"key": full_key, "n": 2}))
        one_error_line(done, "out of memory", spread.cluster.url)
        lines = "".join(json.dumps(r) + "\n" for r in records)
        many = spread.run("sendmany", spread.target("pings"), "-", input=lines)
        lines_in = {0: "2-3", 1: "1, 3", 2: "1-2"}[full_index]  # lines of the input
        one_error_line(
            many,
            "sending failed after 0 of 3 events; of the next 3 (lines 1 to 3) only lines",
            "2 of 3 records are in Redis",
            "were not written",
            master,
        )
        assert f"only lines {lines_in} are in Redis" in many.stderr
        assert "out of memory" in many.stderr
    # What the other masters took is there, read back from each one.
    for _, number in others:
        with spread.node_client(number) as node:
            assert node.xlen(spread.partition_key(number)) == 2
    with spread.node_client(full_partition) as node:
        assert node.xlen(spread.partition_key(full_partition)) == 0
    assert sent_ids(spread, [{"key": full_key, "n": 3}])[0] is not None
