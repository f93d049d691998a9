"""runnel 0.1's way of running things, against the private redis-server.

0.1's guide: ``Worker(app).start()`` runs the app's processors (or a list of names);
``app.redis`` is an asyncio Redis client for the app's own commands; ``event.group`` is
the consumer group and ``event.recovering`` says whether the event is a redelivery.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from pathlib import Path

import pytest
import redis

from runnel import ExceptionPolicy, Record, context
from runnel.exceptions import EntryIdError
from runnel.worker import Worker
from tests.support.apps import FAST, Running, keys_by_partition, make_app
from tests.support.processes import cli, env_with


class Ping(Record):
    key: str
    n: int


class Boom(Exception):
    pass


async def test_app_redis_is_a_plain_asyncio_client(redis_url: str, app_name: str) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    try:
        await app.redis.set("mine", "v")
        assert await app.redis.get("mine") == b"v"
        await pings.send(Ping(key="a", n=1))
        assert await app.redis.xlen(pings.partition_key(0)) == 1
        assert app.redis is app.redis  # one client per event loop
    finally:
        await app.aclose()


def test_worker_start_runs_processors_and_marks_redeliveries(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """Two 0.1-style starts: each HALTs on the one event (raising it), so the second sees
    it again."""
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    seen: list[tuple] = []

    @app.processor(pings, exception_policy=ExceptionPolicy.HALT)
    async def proc(events):
        async for event in events:
            where = (
                context.worker_id.get() is not None,
                context.stream.get(),
                context.partition_id.get(),
                context.executor_id.get(),
            )
            seen.append((event.record, event.group, event.recovering, where))
            raise Boom

    async def send() -> None:
        try:
            await pings.send(Ping(key="a", n=1))
        finally:
            await app.aclose()

    asyncio.run(send())
    # 0.1's guide: HALT lets the processor's exception propagate out of the worker.
    with pytest.raises(Boom):
        Worker(app).start()
    with pytest.raises(Boom):
        Worker(app).start(["proc"])
    where = (True, "pings", 0, "proc")
    assert seen == [
        (Ping(key="a", n=1), "proc", False, where),
        (Ping(key="a", n=1), "proc", True, where),
    ]

    async def run_worker() -> int:
        try:
            return await app.run_worker()
        finally:
            await app.aclose()

    # The new API (and the CLI) reports a HALT as exit code 1 instead.
    assert asyncio.run(run_worker()) == 1
    assert len(seen) == 3
    # The failed event is still pending in the group, as HALT leaves it.
    assert redis_client.xpending(pings.partition_key(0), "proc")["pending"] == 1


async def test_send_with_stream_ids(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """0.1: ``send(*records, stream_ids=[...])``: one XADD id per record, ``"*"`` letting
    Redis pick; ids must rise above the partition's last id, else nothing is sent."""
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    key = pings.partition_key(0)
    try:
        ids = await pings.send(
            Ping(key="a", n=1), Ping(key="b", n=2), Ping(key="c", n=3), stream_ids=["5-1", "7", "*"]
        )
        assert ids[:2] == [b"5-1", b"7-0"]
        assert [e[0] for e in redis_client.xrange(key)] == ids
        assert redis_client.xrange(key)[0][1] == pings.encode(Ping(key="a", n=1))
        top = ids[2]

        def entries() -> list:
            return redis_client.xrange(key)

        before = entries()
        # Not above the partition's last id: refused by the store, nothing of the batch sent.
        with pytest.raises(EntryIdError, match=r"not above.*nothing was sent"):
            await pings.send(
                Ping(key="d", n=4), Ping(key="e", n=5), stream_ids=["99999999999999-0", "6-0"]
            )
        with pytest.raises(EntryIdError, match="not above"):
            await pings.send(Ping(key="d", n=4), stream_ids=[top.decode()])
        # Refused before sending: malformed, 0-0, too few, falling within the batch, or an
        # explicit id after a "*" of the same partition.
        for bad in (["x-1"], ["0-0"], ["1-2-3"], ["2**64"], ["18446744073709551616-0"]):
            with pytest.raises(EntryIdError, match="nothing was sent"):
                await pings.send(Ping(key="d", n=4), stream_ids=bad)
        with pytest.raises(EntryIdError, match="one per record"):
            await pings.send(Ping(key="d", n=4), Ping(key="e", n=5), stream_ids=["*"])
        with pytest.raises(EntryIdError, match="sent before it"):
            await pings.send(Ping(key="d", n=4), Ping(key="e", n=5), stream_ids=["99-5", "99-5"])
        with pytest.raises(EntryIdError, match="follows a '\\*'"):
            await pings.send(
                Ping(key="d", n=4), Ping(key="e", n=5), stream_ids=["*", "99999999999999-0"]
            )
        assert entries() == before
        # Over two partitions: the second's id is too low, so the first's is not sent either.
        two = app.stream("two", record=Ping, partition_by="key", partition_count=2)
        k0, k1 = keys_by_partition(two, lambda k: Ping(key=k, n=0), 2)
        await two.send(Ping(key=k1, n=0), stream_ids=["50-0"])
        with pytest.raises(EntryIdError, match="not above 50-0"):
            await two.send(Ping(key=k0, n=1), Ping(key=k1, n=2), stream_ids=["60-0", "40-0"])
        first, second = (two.partition_for(Ping(key=k, n=0)).key for k in (k0, k1))
        assert (redis_client.xlen(first), redis_client.xlen(second)) == (0, 1)
        assert await two.send(Ping(key=k0, n=1), Ping(key=k1, n=2), stream_ids=["60-0", "51"]) == [
            b"60-0",
            b"51-0",
        ]
        # A missing partition takes any id above 0-0; bytes ids work too.
        others = app.stream("others", record=Ping, partition_by="key", partition_count=1)
        assert await others.send(Ping(key="a", n=1), stream_ids=[b"1-0"]) == [b"1-0"]
        # Empty or None: Redis picks every id, as without stream_ids.
        assert len(await pings.send(Ping(key="f", n=6), stream_ids=[])) == 1
    finally:
        await app.aclose()


DOTTED_APP = """
from runnel import App, Record

app = App(name={name!r})


class Ping(Record):
    key: str
    n: int


pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
seen = []


@app.processor(pings)
async def proc(events):
    async for ping in events.records():
        seen.append((ping.key, ping.n))
"""


async def test_dotted_app_name_end_to_end(
    redis_url: str,
    app_name: str,
    redis_client: redis.Redis,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """0.1 allowed any app name, e.g. ``myproj.orders``: a processor runs on it, its keys
    are the documented ones, and ``runnel status`` reports it."""
    name = f"myproj.{app_name}.orders"
    (tmp_path / "dottedmod.py").write_text(DOTTED_APP.format(name=name))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("RUNNEL_REDIS_URL", redis_url)
    for setting, value in FAST.items():
        monkeypatch.setenv(f"RUNNEL_{setting.upper()}", str(value))
    module = importlib.import_module("dottedmod")
    monkeypatch.setitem(sys.modules, "dottedmod", module)  # forgotten after the test
    app = module.app
    assert app.processors["proc"].id == f"{name}.pings.proc"
    sent = [module.Ping(key=f"k{i % 3}", n=i) for i in range(12)]
    async with Running(app) as running:
        await module.pings.send(*sent)
        await running.until(lambda: len(module.seen) == len(sent), "every ping processed")
        await running.until(lambda: redis_client.exists(f"__lead:{name}"), "a leader")
        env = env_with(redis_url)
        shown = await asyncio.to_thread(
            cli, "status", "--json", "dottedmod:app", cwd=tmp_path, env=env
        )
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["app"] == name
    [proc] = report["processors"]
    assert (proc["name"], proc["stream"]) == ("proc", "pings")
    assert [(p["lag"], p["pending"]) for p in proc["partitions"]] == [(0, 0), (0, 0)]
    assert sorted(n for ex in proc["executors"] for n in ex["partitions"]) == [0, 1]
    # Per key, in order.
    for key in ("k0", "k1", "k2"):
        assert [n for k, n in module.seen if k == key] == [p.n for p in sent if p.key == key]
    # The documented layout, with the dotted name as it is.
    keys = {k.decode() for k in redis_client.scan_iter()}
    assert {f"__strm:{name}.pings.0", f"__strm:{name}.pings.1"} <= keys
    assert f"__memb:{name}.pings.proc" in keys
    assert report["leader"]
    groups = redis_client.xinfo_groups(f"__strm:{name}.pings.0")
    assert [g["name"] for g in groups] == [b"proc"]


class Click(Record, primitive=True):
    user: str
    n: int


async def test_entries_sent_with_identities_are_what_0_1_wrote_and_reads(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """A send's identity (its call, a record's key) lives in keys of its own beside the
    partition: each entry holds exactly the fields 0.1 wrote, a 0.1 consumer (a plain
    XREADGROUP on ``__strm:APP.STREAM.N``, the JSON in ``data``) reads every record once,
    and a 0.1 writer appending between a send and its retry changes nothing."""
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    clicks = app.stream(
        "clicks", record=Click, partition_by="user", partition_count=1, idempotency_key="user"
    )
    try:
        records = [Ping(key=f"k{i}", n=i) for i in range(20)]
        await pings.send(*records[:10])
        redis_client.xadd(pings.partition_key(0), {"data": json.dumps({"key": "v01", "n": 99})})
        await pings.send(*records[10:], keys=[f"order-{i}" for i in range(10)])
        await pings.send(*records[10:], keys=[f"order-{i}" for i in range(10)])  # dropped
        await clicks.send(Click(user="ada", n=1), Click(user="bob", n=2))
        await clicks.send(Click(user="ada", n=1))  # dropped
        read = []
        for n in range(2):
            key = f"__strm:{app_name}.pings.{n}"
            redis_client.xgroup_create(key, "v01", id="0")
            for _, entries in redis_client.xreadgroup("v01", "w", {key: ">"}) or []:
                for _, fields in entries:
                    assert set(fields) == {b"data"}
                    read.append(json.loads(fields[b"data"]))
        assert sorted(r["n"] for r in read) == [*range(20), 99]
        key = f"__strm:{app_name}.clicks.0"
        redis_client.xgroup_create(key, "v01", id="0")
        [(_, [(_, first), (_, second)])] = redis_client.xreadgroup("v01", "w", {key: ">"})
        assert (first, second) == ({b"user": b"ada", b"n": b"1"}, {b"user": b"bob", b"n": b"2"})
    finally:
        await app.aclose()
