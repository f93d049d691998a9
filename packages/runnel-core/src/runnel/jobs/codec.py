"""Job arguments and results as bytes, through a named serializer (JSON by default).

Values are turned into plain data by pydantic first, so records, datetimes, UUIDs,
decimals and enums all travel; the job function's annotations turn them back into those
types on the worker (see :mod:`runnel.jobs.signature`). Nothing is ever pickled.

A stored result item starts with one byte: ``v`` and the encoded return value, ``e``
and the error (JSON) of a job that ended DEAD, or ``c`` alone for a job that was cancelled.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import orjson
from pydantic import TypeAdapter

from runnel.codecs.fidelity import JSON, check_finite, refused
from runnel.codecs.resolve import resolve_serializer
from runnel.codecs.serializers import JSONSerializer
from runnel.exceptions import DecodeError, EncodeError
from runnel.interfaces import Serializer
from runnel.jobs.model import ErrorInfo, Progress

_ANY: TypeAdapter[Any] = TypeAdapter(Any)

VALUE = b"v"
ERROR = b"e"
CANCELLED = b"c"
"""The whole result item of a cancelled job: it wakes a waiting ``get()``."""


@lru_cache(maxsize=64)
def serializer_named(name: str) -> Serializer:
    """The serializer a job's ``codec`` names (``json``, ``msgpack``, ``json+zstd``...)."""
    return resolve_serializer(name)


def encode(serializer: Serializer, value: Any) -> bytes:
    """``value`` as stored: :class:`EncodeError` naming the place of what the serializer
    cannot carry (for JSON, a NaN or an infinity, which it would write as ``null``)."""
    compressor = serializer.compressor
    if type(serializer) is JSONSerializer:
        try:
            data = _ANY.dump_json(value)  # straight to JSON bytes, in one pass
        except Exception as exc:  # pydantic's PydanticSerializationError
            raise refused(value, JSON, exc) from exc
        if data.find(b"null") >= 0:
            check_finite(value)  # a None, or a NaN written as null
    else:
        data = serializer.dumps(
            _ANY.dump_python(value, mode=getattr(serializer, "dump_mode", "json"))
        )
    return compressor.compress(data) if compressor is not None else data


def decode(serializer: Serializer, data: bytes) -> Any:
    compressor = serializer.compressor
    if compressor is not None:
        data = compressor.decompress(data)
    return serializer.loads(data)


NO_ARGUMENTS = b'{"args":[]}'


def encode_arguments(
    serializer: Serializer,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> bytes:
    """A call's arguments as stored; ``headers`` (a plugin's, such as a trace context)
    go under their own key, which readers that do not know it ignore."""
    value: dict[str, Any] = {"args": args, "kwargs": kwargs} if kwargs else {"args": args}
    if headers:
        value["headers"] = headers
    if type(serializer) is JSONSerializer and serializer.compressor is None:
        if not args and not kwargs and not headers:
            return NO_ARGUMENTS
        try:
            # Plain values (the usual case), at a third of the cost, written as pydantic
            # writes them (UTC as Z).
            data = orjson.dumps(value, option=orjson.OPT_UTC_Z)
        except TypeError:
            pass  # records, ints beyond 64 bits and the like: through pydantic
        else:
            if data.find(b"null") < 0:
                return data
            try:
                check_finite(value)  # a None, or a NaN written as null
            except EncodeError as exc:
                raise EncodeError(f"job {name!r}: cannot encode the arguments: {exc}") from None
            return data
    try:
        return encode(serializer, value)
    except Exception as exc:  # the serializer or the user's values
        raise EncodeError(f"job {name!r}: cannot encode the arguments: {exc}") from None


def decode_arguments(serializer: Serializer, data: bytes) -> tuple[list[Any], dict[str, Any]]:
    args, kwargs, _, _ = decode_call(serializer, data)
    return args, kwargs


def decode_call(
    serializer: Serializer, data: bytes
) -> tuple[list[Any], dict[str, Any], dict[str, str], Any]:
    """The stored arguments, the headers plugins stored with them (usually none), and what
    a workflow's job gets first (its ``input``: None if none)."""
    try:
        value = decode(serializer, data)
    except Exception as exc:  # the serializer or stored data
        raise DecodeError(f"cannot decode the job's arguments: {exc}") from None
    if not isinstance(value, dict) or not isinstance(value.get("args", []), list):
        raise DecodeError("the job's arguments are not of the form {args: [...], kwargs: {...}}")
    kwargs = value.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise DecodeError("the job's keyword arguments are not an object")
    headers = value.get("headers")
    headers = headers if isinstance(headers, dict) else {}
    return value.get("args", []), kwargs, headers, value.get("input")


def result_item(serializer: Serializer, value: Any) -> bytes:
    return VALUE + encode(serializer, value)


def error_item(error: ErrorInfo) -> bytes:
    return ERROR + orjson.dumps({"type": error.type, "message": error.message})


def read_item(serializer: Serializer, item: bytes) -> tuple[bool, Any]:
    """``(True, value)`` for a result, ``(False, ErrorInfo)`` for a failure or a cancel."""
    kind, body = item[:1], item[1:]
    if kind == VALUE:
        return True, decode(serializer, body)
    if kind == ERROR:
        data = orjson.loads(body)
        return False, ErrorInfo(type=str(data.get("type")), message=str(data.get("message")))
    if kind == CANCELLED:
        return False, ErrorInfo(type="JobCancelled", message="the job was cancelled")
    raise DecodeError(f"unknown result item kind {kind!r}")


def error_json(error: ErrorInfo) -> bytes:
    return orjson.dumps(
        {"type": error.type, "message": error.message, "traceback": error.traceback}
    )


def error_from_json(data: bytes | str | None) -> ErrorInfo | None:
    if not data:
        return None
    try:
        value = orjson.loads(data)
        return ErrorInfo(
            type=str(value.get("type", "")),
            message=str(value.get("message", "")),
            traceback=str(value.get("traceback", "")),
        )
    except (orjson.JSONDecodeError, AttributeError):
        text = data.decode(errors="replace") if isinstance(data, bytes) else str(data)
        return ErrorInfo(type="Error", message=text)


def progress_json(progress: Progress) -> bytes:
    """A progress report as the stores keep it (times in ms, as the job's other times)."""
    return orjson.dumps(
        {
            "fraction": progress.fraction,
            "message": progress.message,
            "at": int(progress.at * 1000),
            "try": progress.tries,
        }
    )


def progress_from_json(data: bytes | str | None) -> Progress | None:
    if not data:
        return None
    try:
        value = orjson.loads(data)
        return Progress(
            fraction=float(value["fraction"]),
            message=str(value.get("message", "")),
            at=int(value["at"]) / 1000,
            tries=int(value["try"]),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None  # not ours to fail on: shown as no progress
