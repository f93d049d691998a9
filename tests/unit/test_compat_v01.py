"""Data written by runnel 0.1 stays readable, and what we write stays readable by 0.1.

runnel 0.1 stored a non-primitive record as one field ``b"data"`` holding
``orjson.dumps(record.dict())`` (datetimes as ISO strings), gzip-compressed when the
serializer had a compressor; and a primitive record as field/value pairs, each value written
by its Redis client as ``str(value)`` (``repr`` for floats, bytes as they are).
"""

from __future__ import annotations

import gzip
from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest

from runnel import Record


class Item(Record):
    id: int
    name: str


class Order(Record):
    order_id: int
    created_at: datetime
    items: list[Item]
    amount: float
    paid: bool
    note: str | None = None


class Click(Record, primitive=True):
    user: str
    n: int
    ratio: float
    ok: bool
    raw: bytes


# Bytes exactly as runnel 0.1 wrote them (orjson output for record.dict()).
V01_ORDER = (
    b'{"order_id":12,"created_at":"2020-01-02T03:04:05+00:00",'
    b'"items":[{"id":1,"name":"w\xc3\xa4dget"},{"id":2,"name":"b"}],'
    b'"amount":9.5,"paid":true,"note":null}'
)
EXPECTED_ORDER = Order(
    order_id=12,
    created_at=datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC),
    items=[Item(id=1, name="wädget"), Item(id=2, name="b")],
    amount=9.5,
    paid=True,
)


def test_reads_v01_json_entry(app):
    stream = app.stream("orders", record=Order, partition_by="order_id")  # default serializer
    assert stream.decode({b"data": V01_ORDER}) == EXPECTED_ORDER


def test_reads_v01_gzip_entry(app):
    stream = app.stream("orders", record=Order, partition_by="order_id", serializer="json+gzip")
    # 0.1 used gzip.compress with its default (current time) mtime.
    assert stream.decode({b"data": gzip.compress(V01_ORDER)}) == EXPECTED_ORDER
    assert stream.decode({b"data": gzip.compress(V01_ORDER, mtime=1_600_000_000)}) == EXPECTED_ORDER


def test_reads_v01_entry_built_with_orjson(app):
    """The same, generated the way 0.1 did it, with other offsets and naive datetimes."""
    stream = app.stream("orders", record=Order, partition_by="order_id")
    for created in (
        datetime(2020, 1, 2, 3, 4, 5, 678000, tzinfo=timezone(timedelta(hours=-7))),
        datetime(2020, 1, 2, 3, 4, 5),
    ):
        v01_dict = {
            "order_id": 1,
            "created_at": created,
            "items": [],
            "amount": 1,
            "paid": False,
            "note": "x",
        }
        entry = {b"data": orjson.dumps(v01_dict)}
        back = stream.decode(entry)
        assert back.created_at == created
        assert back.created_at.utcoffset() == created.utcoffset()
        assert back.amount == 1.0 and back.paid is False and back.note == "x"


def test_reads_v01_entry_with_extra_stream_fields(app):
    """Other fields next to ``data`` (0.1 never wrote any, but XADD allows them) are ignored."""
    stream = app.stream("orders", record=Order, partition_by="order_id")
    assert stream.decode({b"data": V01_ORDER, b"x": b"1"}) == EXPECTED_ORDER


def test_reads_v01_primitive_entry(app):
    stream = app.stream("clicks", record=Click, partition_by="user")
    v01 = {
        b"user": b"ann",
        b"n": str(42).encode(),
        b"ratio": str(0.25).encode(),
        b"ok": str(True).encode(),  # b"True": 0.1 wrote bools with str()
        b"raw": b"\x00\x01",
    }
    assert stream.decode(v01) == Click(user="ann", n=42, ratio=0.25, ok=True, raw=b"\x00\x01")
    v01[b"ok"] = str(False).encode()
    assert stream.decode(v01).ok is False


def _v01_plain(record: Record) -> dict:
    """What 0.1 stored for ``record``: orjson over the record's Python-mode dict."""
    return orjson.loads(orjson.dumps(record.model_dump()))


def _same_instant(ours: str, theirs: str) -> bool:
    return datetime.fromisoformat(ours) == datetime.fromisoformat(theirs)


@pytest.mark.parametrize("serializer", ["json", "json+gzip"])
def test_our_json_is_plain_json_of_the_record(app, serializer):
    stream = app.stream("orders", record=Order, partition_by="order_id", serializer=serializer)
    data = stream.encode(EXPECTED_ORDER)[b"data"]
    if serializer.endswith("+gzip"):
        data = gzip.decompress(data)
    plain = orjson.loads(data)
    assert plain == EXPECTED_ORDER.model_dump(mode="json")
    # The same dict 0.1 wrote, up to how a UTC offset is spelled ("Z" or "+00:00").
    theirs = _v01_plain(EXPECTED_ORDER)
    assert _same_instant(plain.pop("created_at"), theirs.pop("created_at"))
    assert plain == theirs
    assert plain["items"] == [{"id": 1, "name": "wädget"}, {"id": 2, "name": "b"}]


def test_our_json_datetimes_keep_their_offset(app):
    stream = app.stream("orders", record=Order, partition_by="order_id")
    for created in (
        datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(2020, 1, 2, 3, 4, 5, 120000),
    ):
        order = EXPECTED_ORDER.model_copy(update={"created_at": created})
        plain = orjson.loads(stream.encode(order)[b"data"])
        parsed = datetime.fromisoformat(plain["created_at"])
        assert parsed == created and parsed.utcoffset() == created.utcoffset()
        assert plain["created_at"] == _v01_plain(order)["created_at"]


def test_our_primitive_entry_is_what_v01_wrote(app):
    """0.1's Redis client wrote every primitive value with ``str()`` (``repr`` for floats):
    a bool is stored as ``True``/``False``; what we hand the transport encodes the same."""
    stream = app.stream("clicks", record=Click, partition_by="user")
    fields = stream.encode(Click(user="ann", n=42, ratio=0.25, ok=True, raw=b"\x00"))
    assert set(fields) == {b"user", b"n", b"ratio", b"ok", b"raw"}
    assert fields[b"ok"] == b"True"
    assert stream.encode(Click(user="ann", n=0, ratio=0, ok=False, raw=b""))[b"ok"] == b"False"
    # Text as its UTF-8 bytes, which is what the transport sent for a str.
    assert fields[b"n"] == 42 and fields[b"ratio"] == 0.25 and fields[b"user"] == b"ann"


def test_primitive_bools_read_in_both_forms(app):
    """``True``/``False`` (0.1, and now) and ``1``/``0`` (what runnel 0.2 previews wrote)."""
    stream = app.stream("clicks", record=Click, partition_by="user")
    base = {b"user": b"a", b"n": b"1", b"ratio": b"1.0", b"raw": b""}
    for stored, expected in ((b"True", True), (b"False", False), (b"1", True), (b"0", False)):
        assert stream.decode({**base, b"ok": stored}).ok is expected


def test_primitive_stream_with_a_serializer_is_refused_as_in_v01(app):
    """0.1: a primitive stream given a serializer is misconfigured ("Cannot serialize
    primitive records")."""
    from runnel import Misconfigured
    from runnel.serialization import JSONSerializer

    with pytest.raises(Misconfigured, match="primitive"):
        app.stream("clicks", record=Click, partition_by="user", serializer=JSONSerializer())


# runnel 0.1's public names. Expectations are from 0.1's API reference and guide.


def test_v01_modules_name_the_new_objects():
    import runnel
    import runnel.codecs
    from runnel import compression, constants, serialization
    from runnel.interfaces import Compressor, Middleware, Serializer
    from runnel.processing.events import Events

    assert constants.ExceptionPolicy is runnel.ExceptionPolicy
    assert {p.name for p in constants.ExceptionPolicy} >= {"HALT", "QUARANTINE", "IGNORE"}
    assert serialization.JSONSerializer is runnel.codecs.JSONSerializer
    assert serialization.FastJSONSerializer is runnel.codecs.JSONSerializer
    assert isinstance(serialization.default, runnel.codecs.JSONSerializer)
    assert compression.Gzip is runnel.codecs.GzipCompressor
    assert compression.LZ4 is runnel.codecs.LZ4Compressor
    # 0.1's top-level names.
    assert runnel.Events is Events
    assert (runnel.Serializer, runnel.Compressor, runnel.Middleware) == (
        Serializer,
        Compressor,
        Middleware,
    )
    from runnel.worker import Worker

    assert runnel.Worker is Worker


def test_v01_serializer_with_gzip_writes_what_gzip_reads(app):
    """0.1's guide: ``serializer=FastJSONSerializer(compressor=Gzip())``."""
    from runnel.compression import Gzip
    from runnel.serialization import FastJSONSerializer

    stream = app.stream(
        "orders",
        record=Order,
        partition_by="order_id",
        serializer=FastJSONSerializer(compressor=Gzip()),
    )
    data = stream.serialize(EXPECTED_ORDER)[b"data"]
    assert orjson.loads(gzip.decompress(data)) == EXPECTED_ORDER.model_dump(mode="json")
    assert stream.deserialize({b"data": gzip.compress(V01_ORDER)}) == EXPECTED_ORDER


def test_v01_context_variables_are_unset_outside_a_worker():
    from runnel import context

    assert context.worker_id.get() is None
    assert context.executor_id.get() is None
    assert context.stream.get() is None
    assert context.partition_id.get() is None


def test_v01_init_logging_configures_runnel_output():
    import logging

    from runnel.logging import init_logging

    root = logging.getLogger()
    try:
        init_logging(level="warning", format="json")
        assert root.level == logging.WARNING
        assert [h for h in root.handlers if getattr(h, "_runnel", False)]
        with pytest.raises(ValueError):
            init_logging(format="xml")
    finally:
        for handler in [h for h in root.handlers if getattr(h, "_runnel", False)]:
            root.removeHandler(handler)
        root.setLevel(logging.WARNING)


def test_v01_stream_routing_names(app):
    """0.1: ``partition_key(i)`` is ``__strm:{app}.{stream}.{i}``, ``hash(key)`` is
    ``hasher(key) % partition_count`` (md5 of the key's repr by default) and ``route(key)``
    the key of that partition."""
    from hashlib import md5

    stream = app.stream("orders", record=Order, partition_by="order_id", partition_count=7)
    assert stream.partition_key(3) == "__strm:u.orders.3"
    assert stream.all_partition_keys() == [f"__strm:u.orders.{i}" for i in range(7)]
    for key in (12, "ann", b"x"):
        expected = int(md5(repr(key).encode("utf-8")).hexdigest(), 16) % 7
        assert stream.hash(key) == expected
        assert stream.route(key) == f"__strm:u.orders.{expected}"
    assert stream.hash(EXPECTED_ORDER.order_id) == stream.partition_number(EXPECTED_ORDER)


def test_v01_stream_clone(app):
    stream = app.stream("orders", record=Order, partition_by="order_id", partition_count=4)
    other = stream.clone(partition_count=8)
    assert other is not stream and other.partition_count == 8 and stream.partition_count == 4
    assert (other.name, other.record, other.app) == ("orders", Order, app)
    assert other.partition_key(7) == "__strm:u.orders.7"
    assert app.streams["orders"] is stream  # a clone is not registered


def test_v01_event_attributes_default(app):
    from runnel import Event

    stream = app.stream("orders", record=Order, partition_by="order_id")
    event = Event(stream.partitions[0], b"1-0", {b"data": V01_ORDER})
    assert event.recovering is False and event.group == ""
    assert event.record == EXPECTED_ORDER


# pytz time zones, which 0.1 took wherever it took a time zone: the ``timezone`` setting
# (a tzinfo there, ``pytz.UTC`` by default) and ``app.crontab(timezone=...)``, e.g.
# ``timezone=pytz.timezone("GMT")`` in 0.1's reference; and datetimes in records.


def test_v01_pytz_timezone_setting():
    import pytz

    from runnel import App

    app = App(name="u", redis_url="redis://127.0.0.1:1", timezone=pytz.timezone("Europe/London"))
    assert app.settings.timezone == "Europe/London"
    assert app.settings.tz.utcoffset(datetime(2020, 7, 1)) == timedelta(hours=1)
    assert App(name="u", redis_url="redis://127.0.0.1:1", timezone=pytz.UTC).settings.timezone == (
        "UTC"
    )
    fixed = timezone(timedelta(hours=5, minutes=30))
    assert App(name="u", redis_url="redis://127.0.0.1:1", timezone=fixed).settings.tz is fixed
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="unknown time zone"):
        App(name="u", redis_url="redis://127.0.0.1:1", timezone="Mars/Olympus")


def test_v01_crontab_with_pytz_zone(app):
    """Next 17:45 in London after 2020-03-28 18:00 UTC is 16:45 UTC on the 29th (BST
    began that night), whatever form the zone is given in."""
    import pytz

    from runnel import App

    @app.crontab("45 17 * * *", timezone=pytz.timezone("Europe/London"))
    def london():
        pass

    @app.crontab("0 9 * * *", timezone=pytz.timezone("GMT"))
    def gmt():
        pass

    by_setting = App(
        name="u", redis_url="redis://127.0.0.1:1", timezone=pytz.timezone("Asia/Tokyo")
    )

    @by_setting.crontab("0 9 * * *")
    def tokyo():
        pass

    now = datetime(2020, 3, 28, 18, 0, tzinfo=UTC)
    ldn, gmt_job = app.background
    assert ldn.next_delay(now.astimezone(ldn.timezone)) == 22 * 3600 + 45 * 60
    assert gmt_job.next_delay(now.astimezone(gmt_job.timezone)) == 15 * 3600
    [tok] = by_setting.background
    # 09:00 Tokyo = 00:00 UTC on the 29th.
    assert tok.next_delay(now.astimezone(tok.timezone)) == 6 * 3600


def test_v01_records_with_pytz_datetimes(app):
    import pytz

    class Stamped(Record):
        id: int
        at: datetime

    at = pytz.timezone("America/New_York").localize(datetime(2020, 1, 2, 3, 4, 5))
    for serializer in ("json", "msgpack", "json+gzip"):
        stream = app.stream(
            f"s{len(app.streams)}", record=Stamped, partition_by="id", serializer=serializer
        )
        back = stream.decode(stream.encode(Stamped(id=1, at=at)))
        assert back.at == at and back.at.utcoffset() == timedelta(hours=-5)


def shout_hasher(key: object) -> int:
    """A user's own hasher, named by import path in the settings below."""
    return len(str(key))


@pytest.mark.parametrize(
    "path", ["runnel.hashing.default", "runnel.hashing.md5hash", "runnel.hashing:md5hash"]
)
def test_v01_default_hasher_paths_name_md5(path):
    """0.1's default_hasher setting was an import path, "runnel.hashing.default" unless
    changed; the dotted form still names a hasher, and 0.1's names still exist."""
    from runnel.hashing import md5_hasher
    from runnel.settings import Settings

    assert Settings(default_hasher=path).default_hasher is md5_hasher


def test_v01_default_hasher_dotted_path_to_a_user_function(monkeypatch):
    from runnel.settings import Settings

    monkeypatch.setenv("RUNNEL_DEFAULT_HASHER", f"{__name__}.shout_hasher")
    assert Settings().default_hasher is shout_hasher


def test_v01_fasthash_is_the_xxhash_hasher():
    pytest.importorskip("xxhash")
    from runnel.hashing import fasthash, named_hasher
    from runnel.settings import Settings

    xxhash = named_hasher("xxhash")
    assert xxhash is not None
    for key in ("A", 12, ("a", 1)):
        assert fasthash(key) == xxhash(key)
    assert Settings(default_hasher="runnel.hashing.fasthash").default_hasher("A") == xxhash("A")


@pytest.mark.parametrize(
    "path",
    [
        "runnel.serialization.default",  # 0.1's default value of the setting
        "runnel.serialization:default",
        "runnel.serialization.JSONSerializer",  # a class is made with no arguments
    ],
)
def test_v01_default_serializer_import_paths(path):
    from runnel import App
    from runnel.serialization import JSONSerializer

    app = App(name="u", redis_url="redis://127.0.0.1:1", default_serializer=path)
    stream = app.stream("orders", record=Order, partition_by="order_id")
    assert isinstance(stream.serializer, JSONSerializer)
    assert stream.decode({b"data": V01_ORDER}) == EXPECTED_ORDER


def test_v01_default_serializer_path_to_something_else_is_refused():
    from runnel import App
    from runnel.exceptions import Misconfigured

    app = App(
        name="u", redis_url="redis://127.0.0.1:1", default_serializer="runnel.hashing.md5hash"
    )
    with pytest.raises(Misconfigured, match="not a serializer"):
        app.stream("orders", record=Order, partition_by="order_id")


def test_v01_module_names_of_events_and_the_base_error():
    """0.1 defined Events in runnel.events and based its errors on RunnelException."""
    import runnel
    from runnel.events import Events
    from runnel.exceptions import Misconfigured, RunnelException

    assert Events is runnel.Events
    assert issubclass(Misconfigured, RunnelException)
