"""What ``@app.processor`` declares: a function, its stream and how to run it (its
options, :mod:`runnel.options`)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from runnel.interfaces import Middleware
from runnel.options import (
    ProcessorOptions,
    option_defaults,
    option_settings,
    option_types,
    validate_options,
)

if TYPE_CHECKING:
    from runnel.services import Services
    from runnel.stream import Stream

__all__ = [
    "Processor",
    "ProcessorOptions",
    "Processors",
    "option_defaults",
    "option_settings",
    "option_types",
    "validate_options",
]


@dataclass(eq=False, kw_only=True)
class Processor(ProcessorOptions):
    """A processor of a stream's events: what ``@app.processor`` returns.

    Calling it calls the decorated function, so it can still be awaited directly (in a
    test, say). ``id`` is ``{app}.{stream}.{name}``, unique within an app as in runnel 0.1.
    """

    app: Services
    stream: Stream
    func: Callable[[Any], Awaitable[Any]]
    """``async def f(events)``: given the partition's :class:`~runnel.Events`."""
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
    def f(self) -> Callable[[Any], Awaitable[Any]]:
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

    async def __call__(self, events: Any) -> Any:
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
