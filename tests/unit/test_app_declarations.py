"""App declarations: names, processors, background jobs and their schedules."""

from __future__ import annotations

import asyncio
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from runnel import App, Misconfigured, Record, Stream
from runnel.background import BackgroundTask
from runnel.processor import Processor

URL = "redis://127.0.0.1:1"


class Item(Record):
    id: int


@pytest.fixture
def stream(app) -> Stream:
    return app.stream("items", record=Item, partition_by="id")


# Names.


@pytest.mark.parametrize("name", ["", None, 5])
def test_bad_app_names_rejected(name):
    with pytest.raises(Misconfigured, match="non-empty string"):
        App(name=name, redis_url=URL)


@pytest.mark.parametrize("name", ["", None])
def test_bad_stream_names_rejected(app, name):
    with pytest.raises(Misconfigured, match="non-empty string"):
        app.stream(name, record=Item, partition_by="id")


@pytest.mark.parametrize("name", ["my-app_2", "myproj.orders", "a:b", "a b", "{a}"])
def test_names_as_v01_allowed_them(name):
    """runnel 0.1 took any name: it only goes into keys, never parsed back."""
    app = App(name=name, redis_url=URL)
    stream = app.stream(name, record=Item, partition_by="id")

    async def proc(events):
        pass

    processor = app.processor(stream, name=name)(proc)
    assert (app.name, stream.name, processor.name) == (name, name, name)
    assert stream.id == f"{name}.{name}" and processor.id == f"{name}.{name}.{name}"
    assert stream.partition_key(0) == f"__strm:{name}.{name}.0"


def test_dotted_stream_names(app):
    # Dead-letter sinks are "dead.{source}".
    assert app.stream("dead.items", record=Item, partition_by="id").id == "u.dead.items"


def test_empty_processor_name_rejected(app, stream):
    async def proc(events):
        pass

    with pytest.raises(Misconfigured):
        app.processor(stream, name="")(proc)
    assert app.processors == {}


# Streams.


def test_stream_record_must_be_a_record(app):
    with pytest.raises(Misconfigured):
        app.stream("items", record=dict, partition_by="id")


def test_partition_by_must_be_field_or_callable(app):
    with pytest.raises(Misconfigured):
        app.stream("items", record=Item, partition_by=5)


def test_redeclaring_a_stream_with_another_partition_count_is_rejected(app, stream):
    assert (
        app.stream("items", record=Item, partition_by="id").partition_count
        == stream.partition_count
    )
    with pytest.raises(Misconfigured, match="partition_count"):
        app.stream(
            "items", record=Item, partition_by="id", partition_count=stream.partition_count + 1
        )


def test_stream_is_registered(app, stream):
    assert app.streams == {"items": stream}
    assert stream.id == "u.items"


# Processors.


def test_processor_is_registered_and_returned(app, stream):
    """0.1: ``@app.processor`` returns the Processor; it still calls the function."""

    async def printer(events):
        return ("seen", events)

    proc = app.processor(stream)(printer)
    assert isinstance(proc, Processor)
    assert app.processors["printer"] is proc and app.processors["u.items.printer"] is proc
    assert list(app.processors) == ["u.items.printer"] and "printer" in app.processors
    assert proc.stream is stream and proc.func is printer and proc.name == "printer"
    assert proc.id == "u.items.printer" and proc.group == "printer"
    assert printer.__runnel_processor__ is proc and proc.__runnel_processor__ is proc
    assert proc.__name__ == "printer" and proc.__wrapped__ is printer
    assert asyncio.run(proc("x")) == ("seen", "x")


def test_processor_names_unique_per_stream(app, stream):
    """0.1: a name must be unique together with the app and stream."""
    other = app.stream("others", record=Item, partition_by="id")

    async def printer(events):
        pass

    async def another(events):
        pass

    first = app.processor(stream)(printer)
    second = app.processor(other)(printer)  # same name, other stream: allowed
    with pytest.raises(Misconfigured, match="'printer' is already declared on stream 'items'"):
        app.processor(stream, name="printer")(another)
    third = app.processor(stream, name="printer2")(printer)  # an explicit name resolves it
    assert dict(app.processors) == {
        "u.items.printer": first,
        "u.others.printer": second,
        "u.items.printer2": third,
    }
    assert app.processors["printer2"] is third
    with pytest.raises(KeyError, match="2 processors"):
        app.processors["printer"]
    assert app.processors.named("printer") == [first, second]


def test_stacked_processor_decorators_declare_one_function_on_two_streams(app, stream):
    other = app.stream("others", record=Item, partition_by="id")

    @app.processor(other)
    @app.processor(stream)
    async def audit(events):
        pass

    assert audit.id == "u.others.audit" and audit.func.__name__ == "audit"
    assert [p.id for p in app.processors.named("audit")] == ["u.items.audit", "u.others.audit"]
    assert {p.func for p in app.processors.values()} == {audit.func}


def test_processor_must_be_async(app, stream):
    def sync(events):
        pass

    async def agen(events):
        yield

    with pytest.raises(Misconfigured, match="async"):
        app.processor(stream)(sync)
    with pytest.raises(Misconfigured, match="async"):
        app.processor(stream)(agen)
    with pytest.raises(Misconfigured):
        app.processor(stream)(lambda events: None)
    assert app.processors == {}


def test_unknown_processor_option_rejected(app, stream):
    with pytest.raises(Misconfigured, match="prefetch"):
        app.processor(stream, prefetch=3)
    with pytest.raises(Misconfigured, match="bogus"):
        app.processor(stream, bogus=True, lock_expiry=2)


def test_processor_needs_a_stream(app):
    with pytest.raises(Misconfigured):
        app.processor("items")


# Background jobs.


def test_task_with_and_without_parentheses(app):
    @app.task
    def bare():
        pass

    @app.task()
    async def empty():
        pass

    @app.task(on_leader=True)
    async def leader():
        pass

    assert callable(bare) and callable(empty) and callable(leader)  # functions come back
    assert [(j.func, j.kind, j.on_leader) for j in app.background] == [
        (bare, "task", False),
        (empty, "task", False),
        (leader, "task", True),
    ]
    assert app.background[0].name.endswith("bare")


def test_timer(app):
    @app.timer(interval=0.5)
    def tick():
        pass

    @app.timer(interval=10, on_leader=True)
    async def tock():
        pass

    assert [(j.kind, j.interval, j.on_leader) for j in app.background] == [
        ("timer", 0.5, False),
        ("timer", 10, True),
    ]


@pytest.mark.parametrize("interval", [0, -1, -0.5])
def test_timer_interval_must_be_positive(app, interval):
    with pytest.raises(Misconfigured):
        app.timer(interval=interval)
    assert app.background == []


@pytest.mark.parametrize("spec", ["not a cron", "61 * * * *", "* * *", "", "* * * * * * * *"])
def test_bad_crontab_rejected(app, spec):
    with pytest.raises(Misconfigured):
        app.crontab(spec)
    assert app.background == []


def test_crontab_timezone(app):
    @app.crontab("45 17 * * *")
    def default_zone():
        pass

    @app.crontab("0 9 * * 1", timezone="Asia/Tokyo", on_leader=True)
    def named_zone():
        pass

    @app.crontab("0 9 * * *", timezone=ZoneInfo("Europe/Paris"))
    def object_zone():
        pass

    jobs = app.background
    assert [j.kind for j in jobs] == ["crontab"] * 3
    assert (
        jobs[0].spec == "45 17 * * *"
        and jobs[0].timezone == ZoneInfo("UTC")
        and not jobs[0].on_leader
    )
    assert jobs[1].timezone == ZoneInfo("Asia/Tokyo") and jobs[1].on_leader
    assert jobs[2].timezone == ZoneInfo("Europe/Paris")


def test_crontab_defaults_to_the_app_timezone():
    app = App(name="u", redis_url=URL, timezone="America/New_York")
    app.crontab("0 0 * * *")(lambda: None)
    assert app.background[0].timezone == ZoneInfo("America/New_York")


def test_crontab_unknown_timezone_is_misconfigured(app):
    with pytest.raises(Misconfigured):
        app.crontab("0 0 * * *", timezone="Mars/Olympus_Mons")


def test_timer_next_delay_is_the_interval():
    job = BackgroundTask(func=lambda: None, kind="timer", interval=2.5)
    assert job.next_delay(datetime(2020, 1, 1)) == 2.5
    assert job.next_delay(datetime(2031, 7, 9, 23, 59, 59, tzinfo=ZoneInfo("UTC"))) == 2.5


LONDON = ZoneInfo("Europe/London")
TOKYO = ZoneInfo("Asia/Tokyo")
NEW_YORK = ZoneInfo("America/New_York")


@pytest.mark.parametrize(
    ("spec", "now", "expected"),
    [
        ("45 17 * * *", datetime(2024, 1, 15, 17, 0, tzinfo=LONDON), 45 * 60),
        ("45 17 * * *", datetime(2024, 1, 15, 17, 44, 30, tzinfo=LONDON), 30),
        (
            "45 17 * * *",
            datetime(2024, 1, 15, 17, 45, tzinfo=LONDON),
            24 * 3600,
        ),  # strictly after now
        ("45 17 * * *", datetime(2024, 1, 15, 18, 0, tzinfo=LONDON), 23 * 3600 + 45 * 60),
        ("45 17 * * *", datetime(2024, 7, 15, 17, 0, tzinfo=LONDON), 45 * 60),  # in BST
        ("0 9 * * 1", datetime(2024, 1, 15, 10, 0, tzinfo=TOKYO), 7 * 24 * 3600 - 3600),  # a Monday
        ("*/15 * * * *", datetime(2024, 1, 15, 10, 7, tzinfo=TOKYO), 8 * 60),
        ("0 0 1 1 *", datetime(2023, 12, 31, 23, 0, tzinfo=NEW_YORK), 3600),
    ],
)
def test_crontab_next_delay(spec, now, expected):
    job = BackgroundTask(func=lambda: None, kind="crontab", spec=spec, timezone=now.tzinfo)
    assert job.next_delay(now) == expected


@pytest.mark.parametrize(
    ("spec", "now", "expected"),
    [
        # Spring forward (2024-03-10 02:00 EST -> 03:00 EDT): the day is 23 hours long.
        ("45 17 * * *", datetime(2024, 3, 9, 18, 0, tzinfo=NEW_YORK), 22 * 3600 + 45 * 60),
        # Fall back (2024-11-03 02:00 EDT -> 01:00 EST): the day is 25 hours long.
        ("45 17 * * *", datetime(2024, 11, 2, 18, 0, tzinfo=NEW_YORK), 24 * 3600 + 45 * 60),
        # London, spring forward on 2024-03-31.
        ("0 12 * * *", datetime(2024, 3, 30, 12, 0, tzinfo=LONDON), 23 * 3600),
    ],
    ids=["new-york-spring", "new-york-fall", "london-spring"],
)
def test_crontab_next_delay_across_dst(spec, now, expected):
    job = BackgroundTask(func=lambda: None, kind="crontab", spec=spec, timezone=now.tzinfo)
    assert job.next_delay(now) == expected


async def test_jobs_call_sync_and_async_functions():
    calls = []

    async def a():
        calls.append(("async", asyncio.current_task() is not None))

    def s():
        calls.append(("sync", None))

    await BackgroundTask(func=a, kind="task").call()
    await BackgroundTask(func=s, kind="task").call()
    assert calls == [("async", True), ("sync", None)]


async def test_task_runs_once_and_failures_are_logged_not_raised(caplog):
    calls = []

    def boom():
        calls.append(1)
        raise RuntimeError("kaput")

    await BackgroundTask(func=boom, kind="task").run(asyncio.Event())
    assert calls == [1]
    assert "kaput" in caplog.text


async def test_timer_stops_without_calling_when_stopping_is_set():
    calls = []
    stopping = asyncio.Event()
    stopping.set()
    await BackgroundTask(func=lambda: calls.append(1), kind="timer", interval=0.01).run(stopping)
    assert calls == []
