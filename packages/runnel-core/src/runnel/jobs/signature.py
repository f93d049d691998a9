"""Checking a job's arguments against its function, and turning plain data back into the
annotated types (``datetime``, records, ...), with pydantic.

Arguments are checked twice: when enqueued (so a bad call fails in the caller, and
nothing is enqueued) and on the worker after decoding (where JSON's strings and dicts
become the annotated types again).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from runnel.exceptions import Misconfigured
from runnel.jobs.model import InvalidArguments

RESERVED = ("countdown", "eta", "job_id")
"""Keywords ``delay()`` takes for itself, so a job function cannot have them."""


class Signature:
    """The parameters of one job function and how to validate arguments for it."""

    def __init__(self, func: Callable[..., Any], name: str) -> None:
        self.name = name
        self.signature = inspect.signature(func)
        clash = [p for p in self.signature.parameters if p in RESERVED]
        if clash:
            raise Misconfigured(
                f"job {name!r}: parameter {clash[0]!r} has the name of one of delay()'s "
                f"own keywords ({', '.join(RESERVED[:-1])} and {RESERVED[-1]}); "
                "rename the parameter"
            )
        try:
            hints = typing.get_type_hints(func)
        except Exception:  # an annotation that cannot be resolved: take values as they come
            hints = {}
        self.adapters: dict[str, TypeAdapter[Any]] = {}
        for param in self.signature.parameters.values():
            hint = hints.get(param.name, Any)
            if hint is not Any:
                self.adapters[param.name] = TypeAdapter(hint)
        self.result: TypeAdapter[Any] | None = None
        returned = hints.get("return", Any)
        if returned not in (Any, None, type(None)):
            self.result = TypeAdapter(returned)
        self.trivial = not self.adapters
        """Nothing to convert: the worker calls the function with what it decoded."""
        self._shapes: dict[tuple[int, tuple[str, ...]], str | None] = {}
        """Whether a call binds depends only on how many positional arguments it has and
        which keywords: the answer (None, or the error) for each shape seen."""

    def check(self, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> None:
        """Raise :class:`InvalidArguments` unless ``f(*args, **kwargs)`` would bind and every
        annotated argument validates."""
        if not self.trivial:
            self.convert(args, kwargs)
            return
        shape = (len(args), tuple(kwargs))
        try:
            error = self._shapes[shape]
        except KeyError:
            try:
                self.signature.bind(*args, **kwargs)
                error = None
            except TypeError as exc:
                error = f"job {self.name!r}: {exc}"
            if len(self._shapes) < 256:
                self._shapes[shape] = error
        if error is not None:
            raise InvalidArguments(error)

    def convert(
        self, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments bound to the signature and validated into their annotated types."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidArguments(f"job {self.name!r}: {exc}") from None
        if self.trivial:
            return bound.args, bound.kwargs
        values = bound.arguments
        for pname, adapter in self.adapters.items():
            if pname not in values:
                continue
            kind = self.signature.parameters[pname].kind
            try:
                if kind is inspect.Parameter.VAR_POSITIONAL:
                    values[pname] = tuple(adapter.validate_python(v) for v in values[pname])
                elif kind is inspect.Parameter.VAR_KEYWORD:
                    values[pname] = {
                        k: adapter.validate_python(v) for k, v in values[pname].items()
                    }
                else:
                    values[pname] = adapter.validate_python(values[pname])
            except ValidationError as exc:
                raise InvalidArguments(
                    f"job {self.name!r}: argument {pname!r}: {_first_error(exc)}"
                ) from None
        return bound.args, bound.kwargs

    def read_result(self, value: Any) -> Any:
        """A decoded return value as the annotated return type (if any)."""
        if self.result is None:
            return value
        return self.result.validate_python(value)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(x) for x in err["loc"])
    message = err["msg"][:1].lower() + err["msg"][1:]
    given = _shown(err.get("input"))
    text = f"{where}: {message}" if where else message
    return f"{text} (got {given})" if given else text


def _shown(value: Any) -> str:
    """A given value in an error line: short, on one line."""
    if value is None or (isinstance(value, dict | list) and len(repr(value)) > 40):
        return ""
    text = " ".join(repr(value).split())
    return text if len(text) <= 40 else text[:37] + "..."
