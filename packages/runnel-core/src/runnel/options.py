"""A processor's options, each declared once: its type, bounds, default and the setting
that overrides the default.

:class:`runnel.settings.Settings` takes its ``default_*`` processor settings from
:class:`ProcessorOptions`, ``@app.processor`` validates its keywords with it, and
:class:`runnel.processor.Processor` carries the result.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Annotated, Any, get_type_hints

from pydantic import AfterValidator, BeforeValidator, Field, TypeAdapter

from runnel.types import ExceptionPolicy


@dataclass(frozen=True)
class Setting:
    """Marks an option whose setting is not ``default_<option>``."""

    name: str


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _not_retry(value: ExceptionPolicy) -> ExceptionPolicy:
    if value is ExceptionPolicy.RETRY:
        raise ValueError("must be halt, quarantine or ignore (what to do once retries run out)")
    return value


Policy = Annotated[ExceptionPolicy, BeforeValidator(_lower)]


@dataclass(kw_only=True)
class ProcessorOptions:
    """How a processor runs; see docs/settings.md for each option and its unit."""

    exception_policy: Policy = ExceptionPolicy.HALT
    lock_expiry: Annotated[float, Field(gt=0, description="seconds")] = 30
    read_timeout: Annotated[int, Field(gt=0, description="milliseconds")] = 500
    prefetch_count: Annotated[int, Field(gt=0)] = 32
    assignment_attempts: Annotated[int, Field(gt=0)] = 32
    assignment_sleep: Annotated[float, Field(ge=0, description="seconds")] = 2
    grace_period: Annotated[float, Field(ge=0, description="seconds")] = 8
    pool_size: Annotated[int, Field(gt=0)] = 16
    join_delay: Annotated[float, Field(ge=0, description="seconds")] = 2
    # ExceptionPolicy.RETRY. ``retries`` is not ``default_retries``: that is the job queue's.
    retries: Annotated[int, Field(ge=0), Setting("default_event_retries")] = 3
    retry_backoff: Annotated[float, Field(gt=0, description="seconds")] = 0.5
    retry_backoff_cap: Annotated[float, Field(gt=0, description="seconds")] = 30
    retry_jitter: Annotated[float, Field(ge=0, le=1)] = 0
    fallback: Annotated[
        ExceptionPolicy,
        BeforeValidator(_lower),
        AfterValidator(_not_retry),
        Setting("default_retry_fallback"),
    ] = ExceptionPolicy.HALT


_OPTIONS_ADAPTER = TypeAdapter(ProcessorOptions)


@functools.cache
def option_types() -> dict[str, Any]:
    """Each option's annotated type (with its bounds and validators), by option name."""
    hints = get_type_hints(ProcessorOptions, include_extras=True)
    return {f.name: hints[f.name] for f in fields(ProcessorOptions)}


@functools.cache
def option_settings() -> dict[str, str]:
    """The setting that gives each option its default, by option name."""
    named: dict[str, str] = {}
    for option, hint in option_types().items():
        marks = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Setting)]
        named[option] = marks[0].name if marks else f"default_{option}"
    return named


def option_defaults() -> dict[str, Any]:
    return {f.name: f.default for f in fields(ProcessorOptions)}


def validate_options(values: Mapping[str, Any]) -> ProcessorOptions:
    """Options from plain values (raises pydantic's ``ValidationError`` if invalid)."""
    return _OPTIONS_ADAPTER.validate_python(dict(values))
