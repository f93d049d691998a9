"""What ``@app.processor`` declares: a function, its stream and how to run it.

Every processor option is declared once, in :class:`ProcessorOptions`: its type, bounds,
default and the setting that overrides the default. :class:`runnel.settings.Settings`
takes its ``default_*`` processor settings from it, ``@app.processor`` validates its
keywords with it, and :class:`Processor` carries the result.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Annotated, Any, get_type_hints

from pydantic import AfterValidator, BeforeValidator, Field, TypeAdapter

from runnel.interfaces import Middleware
from runnel.types import ExceptionPolicy

if TYPE_CHECKING:
    from runnel.app import App
    from runnel.processing.events import Events
    from runnel.stream import Stream


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
    prefetch_count: Annotated[int, Field(gt=0)] = 8
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


@dataclass(eq=False, kw_only=True)
class Processor(ProcessorOptions):
    """A processor of a stream's events: what ``@app.processor`` returns.

    Calling it calls the decorated function, so it can still be awaited directly (in a
    test, say). ``id`` is ``{app}.{stream}.{name}``, unique within an app as in runnel 0.1.
    """

    app: App
    stream: Stream
    func: Callable[[Events], Awaitable[Any]]
    name: str
    middleware: Sequence[Middleware] = field(default_factory=list)

    def __post_init__(self) -> None:
        functools.update_wrapper(self, self.func, updated=())

    @property
    def id(self) -> str:
        return f"{self.stream.id}.{self.name}"

    @property
    def __runnel_processor__(self) -> Processor:
        """What a decorated function carried before ``@app.processor`` returned this."""
        return self

    @property
    def f(self) -> Callable[[Events], Awaitable[Any]]:
        """runnel 0.1's name for :attr:`func`."""
        return self.func

    @property
    def group(self) -> str:
        """The consumer group it reads in: its name."""
        return self.name

    @property
    def options(self) -> ProcessorOptions:
        return ProcessorOptions(**{f.name: getattr(self, f.name) for f in fields(ProcessorOptions)})

    def __repr__(self) -> str:
        return f"<Processor {self.name} on {self.stream.name}>"

    async def __call__(self, events: Events) -> Any:
        return await self.func(events)


class Processors(Mapping[str, Processor]):
    """An app's processors by id (``{app}.{stream}.{name}``, as runnel 0.1 kept them).

    A name works as a key too when only one processor has it; names are unique per
    stream, so two streams may each have a processor of the same name.
    """

    def __init__(self) -> None:
        self._by_id: dict[str, Processor] = {}

    def add(self, proc: Processor) -> None:
        if proc.id in self._by_id:
            raise KeyError(proc.id)
        self._by_id[proc.id] = proc

    def by_id(self, proc_id: str) -> Processor | None:
        return self._by_id.get(proc_id)

    def named(self, name: str) -> list[Processor]:
        """The processors called ``name`` (or whose id it is)."""
        found = self._by_id.get(name)
        if found is not None:
            return [found]
        return [p for p in self._by_id.values() if p.name == name]

    def __getitem__(self, key: str) -> Processor:
        found = self.named(key)
        if len(found) == 1:
            return found[0]
        if not found:
            raise KeyError(key)
        raise KeyError(f"{key!r} names {len(found)} processors: use an id, one of {self.ids(key)}")

    def ids(self, name: str) -> list[str]:
        return [p.id for p in self.named(name)]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(self.named(key))

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def __repr__(self) -> str:
        return f"Processors({list(self._by_id)})"
