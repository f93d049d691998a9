"""What ``send`` and ``events.send`` accept a processor gets back, on every store: a value
the stream's serializer cannot carry (a NaN on a JSON stream, which JSON would write as
null and the processor could never decode) is refused at the call, naming the field, and
nothing is stored; where the serializer carries it (msgpack, Avro), it arrives as sent.
The codec layer itself is the property of tests/unit/test_codec_fidelity.py."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from runnel import App, Events, ExceptionPolicy, Record
from runnel.exceptions import EncodeError
from runnel.memory import server as memory_servers
from runnel.testing import memory_url, run


@pytest.fixture(params=["memory", "redis", "cluster"])
def store(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "memory":
        url = memory_url()
        yield url
        memory_servers.forget(urlsplit(url).netloc)
    elif request.param == "redis":
        yield request.getfixturevalue("redis_url")
    else:
        yield request.getfixturevalue("redis_cluster_url")


class Reading(Record):
    sensor: str
    value: float
    history: list[float] = []
    count: int = 0


def same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Record):
        return all(same(getattr(a, f), getattr(b, f)) for f in type(a).model_fields)
    return bool(a == b)


ODD = [
    Reading(sensor="a", value=math.nan),
    Reading(sensor="b", value=1.0, history=[math.inf, -math.inf]),
    Reading(sensor="c", value=2.0, count=2**63 - 1),
]


async def test_json_refuses_a_nan_at_send_and_the_worker_goes_on(app_name: str, store: str) -> None:
    """Before, the NaN was stored as null and the HALT processor stopped the worker on it."""
    app = App(name=app_name)
    readings = app.stream("readings", record=Reading, partition_by="sensor", serializer="json")
    seen: list[Reading] = []

    @app.processor(readings, exception_policy=ExceptionPolicy.HALT)
    async def keep(events: Events) -> None:
        async for reading in events.records():
            seen.append(reading)

    async with run(app, store=store) as t:
        with pytest.raises(EncodeError) as caught:
            await readings.send(Reading(sensor="ok", value=1.0), *ODD[:2])
        message = str(caught.value)
        assert "cannot encode Reading (record 2 of 3), nothing was sent" in message
        assert "value: nan: JSON has no NaN or infinity" in message
        with pytest.raises(EncodeError, match=r"history\[0\]: inf: JSON has no NaN"):
            await readings.send(ODD[1])
        big = Reading(sensor="c", value=2.0, count=2**70)  # JSON carries any int
        await readings.send(big, Reading(sensor="d", value=-0.0))
        await t.processed()
        assert t.failures == []
        assert seen == [big, Reading(sensor="d", value=-0.0)]
        assert [r.sensor for r in await t.events(readings)] == ["c", "d"]


@pytest.mark.parametrize("spec", ["msgpack", "avro+zstd"])
async def test_msgpack_and_avro_carry_nan_and_the_infinities(
    app_name: str, store: str, spec: str
) -> None:
    app = App(name=app_name)
    readings = app.stream("readings", record=Reading, partition_by="sensor", serializer=spec)
    seen: list[Reading] = []

    @app.processor(readings, exception_policy=ExceptionPolicy.HALT)
    async def keep(events: Events) -> None:
        async for reading in events.records():
            seen.append(reading)

    async with run(app, store=store) as t:
        await readings.send(*ODD)
        with pytest.raises(EncodeError, match=r"count: 2361183241434822606848 is beyond"):
            await readings.send(Reading(sensor="e", value=0.0, count=2**71))
        await t.processed()
        assert t.failures == []
    assert len(seen) == len(ODD)
    for sent in ODD:
        assert any(same(got, sent) for got in seen), sent


async def test_a_processor_sending_a_nan_to_a_json_stream_fails_that_event(
    app_name: str, store: str
) -> None:
    """``events.send`` refuses it too: the event fails (here IGNORE), nothing is sent for
    it, and the events after it go through."""
    app = App(name=app_name)
    readings = app.stream("readings", record=Reading, partition_by="sensor", serializer="msgpack")
    halves = app.stream("halves", record=Reading, partition_by="sensor", serializer="json")
    got: list[Reading] = []

    @app.processor(readings, exception_policy=ExceptionPolicy.IGNORE)
    async def halve(events: Events) -> None:
        async for event in events:
            reading = event.record
            await events.send(halves, Reading(sensor=reading.sensor, value=reading.value / 2))

    @app.processor(halves, exception_policy=ExceptionPolicy.HALT)
    async def keep(events: Events) -> None:
        async for reading in events.records():
            got.append(reading)

    async with run(app, store=store) as t:
        await readings.send(
            Reading(sensor="a", value=4.0),
            Reading(sensor="a", value=math.inf),
            Reading(sensor="a", value=8.0),
        )
        await t.processed()
        assert [type(f.exception) for f in t.failures] == [EncodeError]
        assert "value: inf: JSON has no NaN or infinity" in str(t.failures[0].exception)
    assert [r.value for r in got] == [2.0, 4.0]
