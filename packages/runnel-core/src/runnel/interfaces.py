"""The interfaces users and plugins implement: serializers, compressors, middleware.

They are plain base classes: subclass them, or write any object with the same methods.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runnel.record import Record
    from runnel.store.schemas import SchemaStore


class Compressor:
    """Turns the serialized bytes of a record into fewer bytes, and back."""

    name: str = "custom"

    def compress(self, value: bytes) -> bytes:
        raise NotImplementedError

    def decompress(self, value: bytes) -> bytes:
        raise NotImplementedError


class Serializer:
    """Turns a record's plain data (dicts, lists, strings, numbers) into bytes and back.

    ``compressor``, when set, is applied after ``dumps`` and before ``loads``.
    """

    name: str = "custom"
    compressor: Compressor | None = None
    dump_mode: str = "json"
    """How records are turned into plain data before ``dumps``: pydantic's ``"json"`` mode
    (strings for datetimes, decimals, bytes...) or ``"python"`` for formats that carry
    more types natively (``dumps`` must then handle datetimes and the like itself)."""

    def dumps(self, value: Any) -> bytes:
        raise NotImplementedError

    def loads(self, value: bytes) -> Any:
        raise NotImplementedError

    def dumps_record(self, record: Record) -> bytes:
        """A whole record as bytes: its plain data (``dump_mode``) through :meth:`dumps`.

        Override to skip the plain-data step when the format allows it (the JSON
        serializer lets pydantic write JSON directly)."""
        return self.dumps(record.model_dump(mode=self.dump_mode))

    def loads_record(self, record: type[Record], data: bytes) -> Record:
        """Bytes back into a ``record``: :meth:`loads`, then pydantic validation."""
        return record.__pydantic_validator__.validate_python(self.loads(data))

    # Optional: serializers whose format depends on the record type or on stored schemas
    # (Avro) override these. The defaults suit self-describing formats (JSON, msgpack).

    def bind(self, record: type[Record]) -> Serializer:
        """The serializer for one stream, whose records are ``record``s.

        Called once per stream. Return ``self`` unless something is derived from the
        record type (a schema), in which case return a new object.
        """
        return self

    async def prepare(self, schemas: SchemaStore, *, writing: bool) -> None:
        """Called before the stream is first written (``writing``) or processed.

        A serializer with schemas stores its writer schema here, refusing one that is
        incompatible with those stored (raise :class:`runnel.exceptions.SchemaIncompatible`),
        and loads the stored ones it needs to read.
        """

    def unknown(self, data: bytes) -> bool:
        """Whether ``data`` was written with a schema :meth:`prepare` did not load.

        The framework then calls :meth:`refresh` before the event reaches the processor.
        """
        return False

    async def refresh(self, schemas: SchemaStore) -> None:
        """Load schemas stored since :meth:`prepare` (a producer started a newer version)."""


class Middleware:
    """A stage in the pipeline between the fetched events and the processor function.

    ``handler`` is an async generator. It iterates over ``parent`` (which yields an
    :class:`~runnel.Event`, or a list of them when the processor uses ``take``) and yields
    the same items on. Middleware run in the order given to ``@app.processor``.

    When the processor fails while handling an item, the framework closes the pipeline:
    ``GeneratorExit`` is raised at each middleware's ``yield``, so a ``finally:`` or
    ``except GeneratorExit:`` around the ``yield`` sees the failure (re-raise it). The
    framework waits for that clean-up before it restarts the processor or hands the
    partition over. ``kwargs`` carries ``partition`` and ``context``;
    ``context.exception`` is the exception that closed the pipeline, if any.
    """

    async def handler(self, parent: AsyncIterator[Any], **kwargs: Any) -> AsyncIterator[Any]:
        async for item in parent:
            yield item
