"""What a partition's state uses of the objects around it: its tables, their source
stream, a windowed table's clock, and a stream it sends to (structural types, so that
the state does not import them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from runnel.record import Record
    from runnel.tables.codec import ValueCodec
    from runnel.types import Event


class Source(Protocol):
    """What a table uses of its source stream (:class:`runnel.Stream`)."""

    @property
    def name(self) -> str: ...

    def hash(self, key: Any) -> int: ...


class Table(Protocol):
    """What a partition's state uses of a table (:class:`runnel.tables.Table`)."""

    @property
    def name(self) -> str: ...

    @property
    def source(self) -> Source: ...

    @property
    def default(self) -> Any: ...

    @property
    def codec(self) -> ValueCodec: ...

    def claim(self, processor: str) -> None: ...

    def writes_here(self, processor: str) -> bool: ...

    def check_key(self, key: Any) -> None: ...


class Clock(Protocol):
    """What a partition's state uses of a windowed table's clock
    (:class:`runnel.tables.clock.Clock`)."""

    def before_now(self, events: list[Event]) -> bool: ...

    async def before(self, events: list[Event]) -> None: ...

    def after_now(self, events: list[Event]) -> bool: ...

    async def after(self, events: list[Event]) -> None: ...

    def rolled_back(self) -> None: ...


class Sink(Protocol):
    """What sending to a stream uses of it (:class:`runnel.Stream`)."""

    @property
    def has_schemas(self) -> bool: ...

    @property
    def partition_size(self) -> int | None: ...

    async def prepare(self, *, writing: bool) -> None: ...

    def entries(self, records: Any) -> Any: ...

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def record(self) -> type[Record]: ...
