"""The job queue's pure parts: the retry backoff, argument signatures and the codec of
arguments, results and errors."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runnel import App, Misconfigured, Record
from runnel.exceptions import DecodeError, EncodeError
from runnel.jobs import ErrorInfo, InvalidArguments, codec
from runnel.jobs.backoff import retry_delay
from runnel.jobs.signature import RESERVED, Signature
from tests.support.units import no_runnel_env  # noqa: F401 (autouse: no RUNNEL_* of the shell)

SERIALIZERS = ["json", "msgpack", "json+gzip", "msgpack+gzip"]

bases = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False, allow_infinity=False)
caps = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
retries = st.integers(min_value=1, max_value=200)
jitters = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


def nominal(retry: int, base: float, cap: float) -> float:
    """The un-jittered delay: base * 2**retry, capped."""
    return min(cap, base * 2.0 ** min(retry, 64))


# Backoff.


@settings(max_examples=300)
@given(retry=retries, base=bases, cap=caps, r=jitters)
def test_retry_delay_is_the_capped_nominal_delay_jittered(
    retry: int, base: float, cap: float, r: float
) -> None:
    """The delay lies in [0.5, 1.5] x the capped nominal delay, and never above the cap."""
    delay = retry_delay(retry, base, cap, rand=lambda: r)
    m = nominal(retry, base, cap)
    assert 0.5 * m <= delay <= cap
    assert delay <= 1.5 * m
    assert delay == min(cap, m * (0.5 + r))


@given(retry=retries, base=bases, cap=caps)
def test_retry_delay_with_the_default_jitter_stays_in_bounds(
    retry: int, base: float, cap: float
) -> None:
    """With the real random jitter the delay is positive, at least half the nominal delay
    and at most the cap."""
    delay = retry_delay(retry, base, cap)
    m = nominal(retry, base, cap)
    assert 0 < 0.5 * m <= delay <= min(cap, 1.5 * m)


@given(base=bases, cap=caps, r=jitters, retry=retries)
def test_retry_delay_never_exceeds_the_cap(base: float, cap: float, r: float, retry: int) -> None:
    """However many retries and whatever the jitter, the cap holds."""
    assert retry_delay(retry, base, cap, rand=lambda: r) <= cap


@given(base=bases, cap=caps, n=st.integers(min_value=1, max_value=120))
def test_retry_delay_unjittered_part_doubles_until_the_cap(base: float, cap: float, n: int) -> None:
    """With the jitter at its midpoint (factor 1) the delay is base*2**n: each retry
    doubles it until the cap, and it never shrinks."""
    at = [retry_delay(k, base, cap, rand=lambda: 0.5) for k in range(1, n + 2)]
    assert all(a <= b for a, b in itertools.pairwise(at))
    for k, (a, b) in enumerate(itertools.pairwise(at), start=1):
        if k < 64:
            assert b == min(cap, 2 * a)
    assert at[0] == min(cap, 2 * base)


def test_retry_delay_first_retry_is_about_twice_the_base() -> None:
    """Retry 1 waits base*2 times the jitter factor (0.5 .. 1.5)."""
    assert retry_delay(1, 0.5, 600, rand=lambda: 0.0) == 0.5
    assert retry_delay(1, 0.5, 600, rand=lambda: 0.5) == 1.0
    assert retry_delay(3, 0.5, 600, rand=lambda: 0.5) == 4.0
    assert retry_delay(30, 0.5, 600, rand=lambda: 0.99) == 600


@given(retry=st.integers(max_value=0))
def test_retry_delay_rejects_retries_below_one(retry: int) -> None:
    with pytest.raises(ValueError):
        retry_delay(retry, 0.5, 600)


# Signatures.


class Point(Record):
    x: int
    when: datetime


def test_signature_binds_and_converts_to_the_annotated_types() -> None:
    """convert() binds like a call and validates each annotated argument into its type."""

    def f(when: datetime, point: Point, nums: list[int], *rest: int, tag: str = "t", **kw: Point):
        return None

    sig = Signature(f, "f")
    assert not sig.trivial
    when = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    args, kwargs = sig.convert(
        [when.isoformat(), {"x": "1", "when": when.isoformat()}, ["2", 3], "4", 5],
        {"tag": "hi", "extra": {"x": 9, "when": when.isoformat()}},
    )
    assert args == (when, Point(x=1, when=when), [2, 3], 4, 5)
    assert isinstance(args[0], datetime) and isinstance(args[1], Point)
    assert kwargs == {"tag": "hi", "extra": Point(x=9, when=when)}


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((), {}, "missing"),
        ((1, 2, 3), {}, "too many"),
        ((1,), {"nope": 2}, "unexpected"),
        (("x",), {}, "argument 'n'"),
        ((1,), {"nums": ["a"]}, "argument 'nums'"),
    ],
)
def test_signature_check_raises_invalid_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any], match: str
) -> None:
    """Arguments that do not bind or do not validate raise InvalidArguments (a TypeError)
    naming the job."""

    def f(n: int, nums: list[int] | None = None) -> int:
        return n

    sig = Signature(f, "counted")
    with pytest.raises(InvalidArguments, match=match) as raised:
        sig.check(args, kwargs)
    assert isinstance(raised.value, TypeError)
    assert "'counted'" in str(raised.value)


def test_signature_without_annotations_takes_values_as_they_come() -> None:
    """An unannotated function is trivial: arguments are only bound, not converted."""

    def f(a, b=2):  # type: ignore[no-untyped-def]
        return a

    sig = Signature(f, "f")
    assert sig.trivial and sig.result is None
    assert sig.convert(["1"], {"b": "x"}) == (("1", "x"), {})
    assert sig.read_result({"any": "thing"}) == {"any": "thing"}
    with pytest.raises(InvalidArguments):
        sig.check([], {})


def test_signature_reads_results_into_the_return_annotation() -> None:
    def stamp() -> datetime:
        raise NotImplementedError

    def nothing() -> None:
        return None

    when = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert Signature(stamp, "stamp").read_result(when.isoformat()) == when
    assert Signature(nothing, "nothing").result is None
    assert Signature(nothing, "nothing").read_result(5) == 5


@pytest.mark.parametrize("reserved", RESERVED)
def test_reserved_parameter_names_are_refused(reserved: str, app: App) -> None:
    """countdown, eta and job_id belong to delay(): a job declaring one is refused at
    decoration with Misconfigured."""
    namespace: dict[str, Any] = {}
    exec(f"def f(x, {reserved}=None):\n    return x", namespace)
    with pytest.raises(Misconfigured) as refused:
        Signature(namespace["f"], "f")
    assert str(refused.value) == (
        f"job 'f': parameter {reserved!r} has the name of one of delay()'s own keywords "
        "(countdown, eta and job_id); rename the parameter"
    )
    with pytest.raises(Misconfigured, match=reserved):
        app.job(namespace["f"])
    exec(f"async def g(*, {reserved}: int):\n    return 1", namespace)
    with pytest.raises(Misconfigured, match=reserved):
        app.job(retries=1)(namespace["g"])
    assert app.jobs == {}


# The codec.


@pytest.mark.parametrize("name", SERIALIZERS)
def test_arguments_round_trip_through_each_serializer(name: str) -> None:
    """Datetimes, records, UUIDs, decimals, dates and nested data encode to plain data and
    come back as the annotated types through the job's signature."""

    def f(
        when: datetime,
        point: Point,
        ident: uuid.UUID,
        amount: Decimal,
        day: date,
        nested: dict[str, list[int]],
        naive: datetime,
        *,
        text: str = "",
    ) -> None:
        return None

    when = datetime(2020, 1, 2, 3, 4, 5, 123456, tzinfo=timezone(timedelta(hours=2)))
    args = (
        when,
        Point(x=3, when=when),
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        Decimal("12.50"),
        date(2021, 3, 4),
        {"a": [1, 2], "b": []},
        datetime(2021, 6, 30, 23, 59, 59),
    )
    kwargs = {"text": "gädget ✓"}
    serializer = codec.serializer_named(name)
    data = codec.encode_arguments(serializer, "f", args, kwargs)
    assert isinstance(data, bytes)
    decoded_args, decoded_kwargs = codec.decode_arguments(serializer, data)
    assert isinstance(decoded_args, list) and decoded_kwargs == kwargs
    converted, converted_kwargs = Signature(f, "f").convert(decoded_args, decoded_kwargs)
    assert converted == args
    assert converted_kwargs == kwargs
    assert converted[0].utcoffset() == timedelta(hours=2)
    assert converted[6].tzinfo is None


@pytest.mark.parametrize("name", SERIALIZERS)
def test_arguments_without_keywords_round_trip(name: str) -> None:
    serializer = codec.serializer_named(name)
    data = codec.encode_arguments(serializer, "f", (1, "two", [3.5, None], True), {})
    assert codec.decode_arguments(serializer, data) == ([1, "two", [3.5, None], True], {})


def test_json_arguments_are_plain_json() -> None:
    """The JSON codec writes {args, kwargs} (kwargs left out when empty), readable by
    anyone."""
    serializer = codec.serializer_named("json")
    data = codec.encode_arguments(serializer, "f", (1, datetime(2020, 1, 1, tzinfo=UTC)), {})
    assert orjson.loads(data) == {"args": [1, "2020-01-01T00:00:00Z"]}
    data = codec.encode_arguments(serializer, "f", (), {"k": uuid.UUID(int=1)})
    assert orjson.loads(data) == {"args": [], "kwargs": {"k": str(uuid.UUID(int=1))}}


def test_arguments_that_cannot_be_encoded_raise_encode_error() -> None:
    with pytest.raises(EncodeError, match="'f'"):
        codec.encode_arguments(codec.serializer_named("json"), "f", (object(),), {})


@pytest.mark.parametrize(
    "payload",
    [
        b"not json at all",
        b"",
        b"[1, 2]",
        b'"text"',
        b'{"args": {"a": 1}}',
        b'{"args": [], "kwargs": [1]}',
        b"\xff\xfe",
    ],
)
def test_bad_argument_payloads_raise_decode_error(payload: bytes) -> None:
    with pytest.raises(DecodeError):
        codec.decode_arguments(codec.serializer_named("json"), payload)


def test_bad_msgpack_and_compressed_payloads_raise_decode_error() -> None:
    with pytest.raises(DecodeError):
        codec.decode_arguments(codec.serializer_named("msgpack"), b"\xc1")
    with pytest.raises(DecodeError):
        codec.decode_arguments(codec.serializer_named("json+gzip"), b'{"args": []}')
    packed = codec.encode(codec.serializer_named("msgpack"), [1, 2])
    with pytest.raises(DecodeError):
        codec.decode_arguments(codec.serializer_named("msgpack"), packed)


def test_empty_arguments_object_decodes_to_no_arguments() -> None:
    assert codec.decode_arguments(codec.serializer_named("json"), b"{}") == ([], {})
    assert codec.decode_arguments(
        codec.serializer_named("json"), b'{"args": [1], "kwargs": null}'
    ) == ([1], {})


@pytest.mark.parametrize("name", SERIALIZERS)
@pytest.mark.parametrize(
    "value",
    [None, 0, "text", [1, "a", None], {"k": {"n": [1.5]}}, True],
)
def test_result_items_round_trip(name: str, value: Any) -> None:
    """A result item is b"v" + the encoded value, read back as (True, value)."""
    serializer = codec.serializer_named(name)
    item = codec.result_item(serializer, value)
    assert item[:1] == codec.VALUE
    assert codec.read_item(serializer, item) == (True, value)


@pytest.mark.parametrize("name", SERIALIZERS)
def test_result_items_carry_records_and_datetimes(name: str) -> None:
    when = datetime(2024, 2, 29, 12, 0, tzinfo=UTC)
    serializer = codec.serializer_named(name)

    def f() -> Point:
        raise NotImplementedError

    ok, value = codec.read_item(serializer, codec.result_item(serializer, Point(x=1, when=when)))
    assert ok
    assert Signature(f, "f").read_result(value) == Point(x=1, when=when)


def test_error_items_round_trip_without_the_traceback() -> None:
    """An error item is b"e" + JSON of type and message; read back as (False, ErrorInfo)."""
    error = ErrorInfo("ValueError", "bad ✓ input", "Traceback ...")
    item = codec.error_item(error)
    assert item[:1] == codec.ERROR
    for name in SERIALIZERS:  # the serializer does not matter for errors
        ok, info = codec.read_item(codec.serializer_named(name), item)
        assert not ok and info == ErrorInfo("ValueError", "bad ✓ input")


def test_unknown_result_item_kind_raises_decode_error() -> None:
    with pytest.raises(DecodeError):
        codec.read_item(codec.serializer_named("json"), b"x123")


def test_error_json_round_trip_and_fallbacks() -> None:
    """The stored error (type, message, traceback) round-trips; text that is not JSON is
    kept as the message of a generic error; nothing stored is None."""
    error = ErrorInfo("KeyError", "'k'", "Traceback (most recent call last): ...")
    assert codec.error_from_json(codec.error_json(error)) == error
    assert codec.error_from_json(codec.error_json(error).decode()) == error
    assert codec.error_from_json(b"plain text") == ErrorInfo("Error", "plain text")
    assert codec.error_from_json("[1, 2]") == ErrorInfo("Error", "[1, 2]")
    assert codec.error_from_json(None) is None
    assert codec.error_from_json(b"") is None
