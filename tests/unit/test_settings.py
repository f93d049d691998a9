"""Settings: defaults, RUNNEL_* environment variables, kwargs, validation, and overrides."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from runnel import App, ExceptionPolicy, Record
from runnel.codecs import JSONSerializer, MsgpackSerializer
from runnel.hashing import md5_hasher
from runnel.settings import Settings

URL = "redis://127.0.0.1:1"


class Item(Record):
    id: int


async def _noop(events):
    pass


def test_defaults_as_documented():
    s = Settings()
    assert s.log_format == "console"
    assert s.log_level == "info"
    assert s.autodiscover is None
    assert s.timezone == "UTC"
    assert s.testing is False
    assert s.default_partition_count == 16
    assert s.default_partition_size == 50_000
    assert s.default_exception_policy is ExceptionPolicy.HALT
    assert s.default_hasher is md5_hasher
    # Units: ms for leadership_poll_interval and read_timeout, seconds for the others.
    assert s.leadership_poll_interval == 4000
    assert s.default_read_timeout == 500
    assert s.default_lock_expiry == 30
    assert s.default_prefetch_count == 32
    assert s.default_assignment_attempts == 32
    assert s.default_assignment_sleep == 2
    assert s.default_grace_period == 8
    assert s.default_pool_size == 16
    assert s.default_join_delay == 2


def test_default_serializer_is_uncompressed_json(app):
    stream = app.stream("items", record=Item, partition_by="id")
    assert isinstance(stream.serializer, JSONSerializer)
    assert stream.serializer.compressor is None
    assert stream.encode(Item(id=3)) == {b"data": b'{"id":3}'}


def test_every_documented_setting_is_a_field():
    documented = {
        "redis_url",
        "log_format",
        "log_level",
        "autodiscover",
        "timezone",
        "leadership_poll_interval",
        "testing",
        "default_partition_count",
        "default_partition_size",
        "default_serializer",
        "default_hasher",
        "default_exception_policy",
        "default_lock_expiry",
        "default_read_timeout",
        "default_prefetch_count",
        "default_assignment_attempts",
        "default_assignment_sleep",
        "default_grace_period",
        "default_pool_size",
        "default_join_delay",
    }
    assert documented <= set(Settings.model_fields)


def test_environment_applies(monkeypatch):
    monkeypatch.setenv("RUNNEL_REDIS_URL", "redis://example.invalid:6380/2")
    monkeypatch.setenv("RUNNEL_LOG_LEVEL", "debug")
    monkeypatch.setenv("RUNNEL_LOG_FORMAT", "json")
    monkeypatch.setenv("RUNNEL_TIMEZONE", "Europe/London")
    monkeypatch.setenv("RUNNEL_TESTING", "1")
    monkeypatch.setenv("RUNNEL_AUTODISCOVER", "myproj/**/streams.py")
    monkeypatch.setenv("RUNNEL_DEFAULT_PARTITION_COUNT", "4")
    monkeypatch.setenv("RUNNEL_DEFAULT_EXCEPTION_POLICY", "quarantine")
    monkeypatch.setenv("RUNNEL_DEFAULT_SERIALIZER", "msgpack+gzip")
    monkeypatch.setenv("RUNNEL_DEFAULT_READ_TIMEOUT", "500")
    monkeypatch.setenv("RUNNEL_DEFAULT_GRACE_PERIOD", "0.5")
    app = App(name="u")
    s = app.settings
    assert s.redis_url == "redis://example.invalid:6380/2"
    assert s.log_level == "debug"
    assert s.log_format == "json"
    assert s.timezone == "Europe/London"
    assert s.testing is True
    assert s.autodiscover == "myproj/**/streams.py"
    assert s.default_partition_count == 4
    assert s.default_exception_policy is ExceptionPolicy.QUARANTINE
    assert s.default_read_timeout == 500
    assert s.default_grace_period == 0.5
    stream = app.stream("items", record=Item, partition_by="id")
    assert stream.partition_count == 4
    assert (
        isinstance(stream.serializer, MsgpackSerializer)
        and stream.serializer.compressor is not None
    )


def test_environment_names_are_case_insensitive_in_value(monkeypatch):
    monkeypatch.setenv("RUNNEL_LOG_LEVEL", "WARNING")
    monkeypatch.setenv("RUNNEL_DEFAULT_EXCEPTION_POLICY", "IGNORE")
    s = Settings()
    assert s.log_level == "warning"
    assert s.default_exception_policy is ExceptionPolicy.IGNORE


def test_kwargs_win_over_environment(monkeypatch):
    monkeypatch.setenv("RUNNEL_REDIS_URL", "redis://from-env:1")
    monkeypatch.setenv("RUNNEL_LOG_LEVEL", "debug")
    monkeypatch.setenv("RUNNEL_DEFAULT_PARTITION_COUNT", "4")
    app = App(name="u", redis_url=URL, log_level="error", default_partition_count=32)
    assert app.settings.redis_url == URL
    assert app.settings.log_level == "error"
    assert app.settings.default_partition_count == 32


def _no_runnel_variables(monkeypatch):
    for key in [k for k in os.environ if k.upper().startswith("RUNNEL_")]:
        monkeypatch.delenv(key)


def test_environment_variable_names_in_any_case(monkeypatch):
    _no_runnel_variables(monkeypatch)
    monkeypatch.setenv("runnel_log_level", "debug")
    monkeypatch.setenv("Runnel_Default_Partition_Count", "3")
    monkeypatch.setenv("RUNNEL_NOT_A_SETTING", "1")  # other RUNNEL_* variables are ignored
    s = Settings()
    assert (s.log_level, s.default_partition_count) == ("debug", 3)


def test_environment_values_are_validated_as_their_settings_type(monkeypatch):
    _no_runnel_variables(monkeypatch)
    monkeypatch.setenv("RUNNEL_METRICS_PORT", "9100")
    monkeypatch.setenv("RUNNEL_GC_FREEZE", "no")
    monkeypatch.setenv("RUNNEL_WAIT_TIMEOUT", "1e-1")
    monkeypatch.setenv("RUNNEL_REDIS_KEY_LAYOUT", "cluster")
    s = Settings()
    assert (s.metrics_port, s.gc_freeze, s.wait_timeout) == (9100, False, 0.1)
    assert s.redis_key_layout == "cluster"
    monkeypatch.setenv("RUNNEL_METRICS_PORT", "")  # set but empty is a value, not None
    monkeypatch.setenv("RUNNEL_DEFAULT_PARTITION_COUNT", "0")
    with pytest.raises(ValidationError) as info:
        Settings()
    errors = [(e["loc"][0], e["input"]) for e in info.value.errors()]
    assert errors == [("metrics_port", ""), ("default_partition_count", "0")]
    assert info.value.title == "Settings"  # what runnel's CLI names the variables by


def test_a_keyword_names_its_setting_in_any_case(monkeypatch):
    _no_runnel_variables(monkeypatch)
    monkeypatch.setenv("RUNNEL_LOG_LEVEL", "error")
    assert Settings(LOG_LEVEL="debug").log_level == "debug"
    assert Settings(Log_Level="warning", log_level="info").log_level == "warning"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"log_level": "loud"}, "log_level"),
        ({"log_format": "xml"}, "log_format"),
        ({"timezone": "Mars/Olympus_Mons"}, "timezone"),
        ({"default_partition_count": -1}, "default_partition_count"),
        ({"default_partition_count": 0}, "default_partition_count"),
        ({"default_partition_size": 0}, "default_partition_size"),
        ({"leadership_poll_interval": 0}, "leadership_poll_interval"),
        ({"default_prefetch_count": "many"}, "default_prefetch_count"),
        ({"default_exception_policy": "explode"}, "default_exception_policy"),
        ({"default_grace_period": -1}, "default_grace_period"),
        ({"default_hasher": 5}, "default_hasher"),
        ({"default_hasher": "json:__name__"}, "default_hasher"),  # importable, not callable
        ({"no_such_setting": 1}, "no_such_setting"),
    ],
)
def test_bad_values_raise_validation_error(kwargs, field):
    with pytest.raises(ValidationError) as info:
        App(name="u", redis_url=URL, **kwargs)
    assert [e["loc"][0] for e in info.value.errors()] == [field]


def test_bad_environment_value_raises_validation_error(monkeypatch):
    monkeypatch.setenv("RUNNEL_LOG_LEVEL", "loud")
    with pytest.raises(ValidationError, match="log_level"):
        App(name="u", redis_url=URL)


@pytest.mark.parametrize("value", ["no_such_module_zz:h", "no-colon"])
def test_unimportable_default_hasher_raises_validation_error(value):
    with pytest.raises(ValidationError) as info:
        Settings(default_hasher=value)
    assert [e["loc"][0] for e in info.value.errors()] == ["default_hasher"]


@pytest.fixture
def hasher_module(tmp_path, uid, forget_modules, monkeypatch):
    name = f"unit_hasher_{uid}"
    (tmp_path / f"{name}.py").write_text("def always_three(key):\n    return 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_modules.append(name)
    return name


def test_default_hasher_by_import_path(hasher_module):
    app = App(name="u", redis_url=URL, default_hasher=f"{hasher_module}:always_three")
    assert app.settings.default_hasher.__name__ == "always_three"
    stream = app.stream("items", record=Item, partition_by="id", partition_count=16)
    assert stream.partition_number(Item(id=1)) == 3


def test_default_hasher_from_environment(hasher_module, monkeypatch):
    monkeypatch.setenv("RUNNEL_DEFAULT_HASHER", f"{hasher_module}:always_three")
    app = App(name="u", redis_url=URL)
    assert app.stream("items", record=Item, partition_by="id").partition_number(Item(id=99)) == 3


def test_default_hasher_as_callable():
    app = App(name="u", redis_url=URL, default_hasher=lambda key: 5)
    assert app.stream("items", record=Item, partition_by="id").partition_number(Item(id=1)) == 5


def test_stream_arguments_override_defaults():
    app = App(
        name="u",
        redis_url=URL,
        default_partition_count=8,
        default_partition_size=100,
        default_serializer="msgpack",
        default_hasher=lambda key: 1,
    )
    plain = app.stream("a", record=Item, partition_by="id")
    assert (plain.partition_count, plain.partition_size) == (8, 100)
    assert isinstance(plain.serializer, MsgpackSerializer)
    assert plain.partition_number(Item(id=0)) == 1
    custom = app.stream(
        "b",
        record=Item,
        partition_by="id",
        partition_count=3,
        partition_size=7,
        serializer="json",
        hasher=lambda key: 2,
    )
    assert (custom.partition_count, custom.partition_size) == (3, 7)
    assert isinstance(custom.serializer, JSONSerializer)
    assert custom.partition_number(Item(id=0)) == 2


def test_processor_arguments_override_defaults():
    app = App(
        name="u",
        redis_url=URL,
        default_prefetch_count=3,
        default_exception_policy="quarantine",
        default_lock_expiry=30,
        default_read_timeout=100,
        default_pool_size=2,
    )
    stream = app.stream("a", record=Item, partition_by="id")
    app.processor(stream, name="plain")(_noop)
    app.processor(
        stream,
        name="custom",
        exception_policy="ignore",
        prefetch_count=5,
        lock_expiry=9,
        read_timeout=50,
        assignment_attempts=1,
        assignment_sleep=0.1,
        grace_period=0,
        pool_size=4,
        join_delay=0.5,
    )(_noop)
    app.processor(stream, name="upper", exception_policy="IGNORE")(_noop)
    app.processor(stream, name="enum", exception_policy=ExceptionPolicy.HALT)(_noop)
    plain, custom = app.processors["plain"], app.processors["custom"]
    assert plain.exception_policy is ExceptionPolicy.QUARANTINE
    assert (plain.prefetch_count, plain.lock_expiry, plain.read_timeout, plain.pool_size) == (
        3,
        30,
        100,
        2,
    )
    assert (
        plain.assignment_attempts,
        plain.assignment_sleep,
        plain.grace_period,
        plain.join_delay,
    ) == (
        32,
        2,
        8,
        2,
    )
    assert custom.exception_policy is ExceptionPolicy.IGNORE
    assert (custom.prefetch_count, custom.lock_expiry, custom.read_timeout, custom.pool_size) == (
        5,
        9,
        50,
        4,
    )
    assert (
        custom.assignment_attempts,
        custom.assignment_sleep,
        custom.grace_period,
        custom.join_delay,
    ) == (
        1,
        0.1,
        0,
        0.5,
    )
    assert app.processors["upper"].exception_policy is ExceptionPolicy.IGNORE
    assert app.processors["enum"].exception_policy is ExceptionPolicy.HALT


@pytest.mark.parametrize("arg", ["partition_count", "partition_size"])
def test_stream_rejects_zero_partitions(app, arg):
    from runnel import Misconfigured

    with pytest.raises(Misconfigured):
        app.stream("a", record=Item, partition_by="id", **{arg: 0})


@pytest.mark.parametrize("arg", ["partition_count", "partition_size"])
def test_stream_rejects_negative_partitions(app, arg):
    from runnel import Misconfigured

    with pytest.raises(Misconfigured):
        app.stream("a", record=Item, partition_by="id", **{arg: -1})


@pytest.mark.parametrize(
    "kwargs",
    [{"prefetch_count": 0}, {"lock_expiry": -1}, {"pool_size": 0}, {"exception_policy": "explode"}],
    ids=["prefetch_count=0", "lock_expiry=-1", "pool_size=0", "policy=explode"],
)
def test_processor_rejects_bad_override_values(app, kwargs):
    from runnel import Misconfigured

    stream = app.stream("a", record=Item, partition_by="id")
    with pytest.raises(Misconfigured):
        app.processor(stream, **kwargs)(_noop)


# One processor options model: ProcessorOptions declares each option once, and the
# settings, @app.processor and the Processor all take it from there.


def test_every_processor_option_is_a_setting_with_its_default():
    from dataclasses import fields

    from runnel.processor import Processor, ProcessorOptions, option_settings

    named = option_settings()
    assert named["retries"] == "default_event_retries"
    assert named["fallback"] == "default_retry_fallback"
    assert named["lock_expiry"] == "default_lock_expiry"
    s = Settings()
    options = {f.name: f.default for f in fields(ProcessorOptions)}
    assert set(options) == set(named)
    for option, default in options.items():
        assert getattr(s, named[option]) == default, option
    assert {f.name for f in fields(ProcessorOptions)} <= {f.name for f in fields(Processor)}
    assert s.processor_options() == ProcessorOptions()


def test_option_rules_apply_to_settings_and_arguments_alike(monkeypatch):
    from runnel import Misconfigured

    for setting, value in (
        ("RUNNEL_DEFAULT_RETRY_FALLBACK", "retry"),
        ("RUNNEL_DEFAULT_PREFETCH_COUNT", "0"),
        ("RUNNEL_DEFAULT_RETRY_JITTER", "2"),
    ):
        monkeypatch.setenv(setting, value)
        with pytest.raises(ValidationError):
            Settings()
        monkeypatch.delenv(setting)
    monkeypatch.setenv("RUNNEL_DEFAULT_RETRY_FALLBACK", "IGNORE")
    assert Settings().default_retry_fallback is ExceptionPolicy.IGNORE
    app = App(name="u", redis_url=URL)
    stream = app.stream("a", record=Item, partition_by="id")
    for bad in ({"fallback": "retry"}, {"prefetch_count": 0}, {"retry_jitter": 2}):
        with pytest.raises(Misconfigured, match=next(iter(bad))):
            app.processor(stream, name="p", **bad)(_noop)
    proc = app.processor(stream, name="p", fallback="QUARANTINE", retry_jitter=0.5)(_noop)
    assert proc.fallback is ExceptionPolicy.QUARANTINE and proc.retry_jitter == 0.5
    assert proc.options.retry_jitter == 0.5 and proc.retries == 3
