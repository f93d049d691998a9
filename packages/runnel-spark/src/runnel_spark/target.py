"""Which stream the options name, and the store that holds it, on the driver and executors.

A ``Stream`` cannot travel to executors (its app holds connections, ``partition_by`` may be
a lambda), so a :class:`Target` carries what names it: the import path, the store's
synchronous log (:class:`runnel.store.synclog.SyncLog`, which pickles as its URL) that the
driver got from the URL's transport, and the writer schemas the driver loaded. Each
executor process imports the stream once and keeps one log per URL.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

from runnel.app import App
from runnel.exceptions import Misconfigured, SchemaIncompatible
from runnel.imports import import_object
from runnel.store.log import PartitionId
from runnel.store.resolve import backend_for
from runnel.store.schemas import Check, SchemaStore
from runnel.store.synclog import SyncLog
from runnel.stream import Stream

_streams: dict[tuple[str, str | None], Stream] = {}
_logs: dict[str, SyncLog] = {}
_prepared: set[tuple[Any, ...]] = set()


def load_stream(stream: str, app: str | None = None) -> Stream:
    """The stream ``MODULE:STREAM``, or the stream named ``stream`` of the app ``MODULE:APP``.

    Imported once per process: executors reuse it for every task.
    """
    cached = _streams.get((stream, app))
    if cached is not None:
        return cached
    if app:
        found = import_object(app)
        if not isinstance(found, App):
            raise Misconfigured(f"app={app!r} is {type(found).__name__}, not a runnel App")
        if stream not in found.streams:
            known = ", ".join(sorted(found.streams)) or "none"
            raise Misconfigured(f"app {app!r} declares no stream {stream!r} (it has: {known})")
        loaded = found.streams[stream]
    else:
        if ":" not in stream:
            raise Misconfigured(
                f"stream={stream!r}: give MODULE:STREAM (a Stream object), "
                "or app=MODULE:APP with stream=NAME"
            )
        loaded = import_object(stream)
        if not isinstance(loaded, Stream):
            kind = type(loaded).__name__
            raise Misconfigured(f"stream={stream!r} is {kind}, not a runnel Stream")
    _streams[(stream, app)] = loaded
    return loaded


def _signature(stream: Stream) -> tuple[Any, ...]:
    serializer = stream.serializer
    compressor = getattr(serializer, "compressor", None)
    return (
        stream.id,
        f"{stream.record.__module__}.{stream.record.__qualname__}",
        stream.partition_count,
        type(serializer).__name__ if serializer is not None else "primitive",
        type(compressor).__name__ if compressor is not None else None,
    )


@dataclasses.dataclass
class Target:
    """A stream and its store, as the driver resolved them; picklable."""

    stream_path: str
    app_path: str | None
    url: str
    signature: tuple[Any, ...]
    log: SyncLog | None = None
    schemas: dict[str, str] | None = None
    writing: bool = False
    chunk: int = 1000
    exactly_once: bool = True
    """Writes give each row an identity (option ``exactlyOnce``, default true)."""
    key_column: str | None = None
    """The column whose value is each row's key (option ``idempotencyKey``)."""

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Target:
        """Read the options on the driver: import the stream, find its store's URL."""
        options = lower(options)
        path = options.get("stream") or options.get("path")
        if not path:
            raise Misconfigured(
                "the runnel data source needs option stream=MODULE:STREAM "
                "(or app=MODULE:APP and stream=NAME)"
            )
        app_path = options.get("app") or None
        stream = load_stream(path, app_path)
        return cls(
            stream_path=path,
            app_path=app_path,
            url=options.get("url") or stream.app.settings.redis_url,
            signature=_signature(stream),
            chunk=positive(options, "chunksize", 1000),
            exactly_once=boolean(options, "exactlyonce", True),
            key_column=options.get("idempotencykey") or None,
        )

    # On the driver.

    def prepare(self, *, writing: bool) -> None:
        """Get the store's synchronous log from the URL's transport, and let the stream's
        serializer check and store (writing) or load (reading) its schemas, once on the
        driver; executors get the log and the schemas loaded."""
        stream = load_stream(self.stream_path, self.app_path)
        serializer = stream.serializer

        async def run() -> None:
            transport = backend_for(self.url, stream.app.settings)
            try:
                log = transport.sync_log()
                if log is None:
                    raise Misconfigured(
                        f"{type(transport).__name__} offers no synchronous access to its logs, "
                        "which runnel-spark needs"
                    )
                self.log = log
                if serializer is not None and stream.has_schemas:
                    store = transport.schema_store(stream.app.name, stream.name)
                    await serializer.prepare(store, writing=writing)
                    self.schemas = await store.all()
            finally:
                await transport.aclose()

        try:
            asyncio.run(run())
        except SchemaIncompatible as exc:
            raise SchemaIncompatible(f"stream {stream.id!r}: {exc}") from None
        self.writing = writing

    # On any process.

    def stream(self) -> Stream:
        stream = load_stream(self.stream_path, self.app_path)
        mine = _signature(stream)
        if mine != self.signature:
            raise Misconfigured(
                f"{self.stream_path} imported here is not what the driver imported: "
                f"{_difference(self.signature, mine)}; give every Spark process the same code "
                "and RUNNEL_* environment (spark.executorEnv.RUNNEL_...)"
            )
        if self.schemas and stream.serializer is not None:
            # What the driver loaded, handed to the serializer as a store of its own.
            done = (self.stream_path, self.app_path, self.writing, *sorted(self.schemas))
            if done not in _prepared:
                snapshot = Snapshot(self.schemas)
                asyncio.run(stream.serializer.prepare(snapshot, writing=self.writing))
                _prepared.add(done)
        return stream

    def sync_log(self) -> SyncLog:
        """This process's log for the store (one per URL, reused by every task)."""
        if self.log is None:
            raise Misconfigured("Target.prepare() was not called on the driver")
        return _logs.setdefault(self.log.url, self.log)

    def partitions(self, stream: Stream) -> list[PartitionId]:
        """The store's identities of the stream's partitions, by number."""
        return [PartitionId(stream.app.name, stream.name, n) for n in range(stream.partition_count)]

    def refresh_schemas(self, stream: Stream) -> bool:
        """Load the writer schemas stored since the driver looked; False if none are new."""
        serializer = stream.serializer
        if serializer is None or not stream.has_schemas:
            return False
        log = self.sync_log()

        async def run() -> bool:
            transport = backend_for(log.url, stream.app.settings)
            try:
                store = transport.schema_store(stream.app.name, stream.name)
                stored = await store.all()
                if stored.keys() <= (self.schemas or {}).keys():
                    return False
                await serializer.refresh(store)
                self.schemas = stored
                return True
            finally:
                await transport.aclose()

        return asyncio.run(run())


class Snapshot(SchemaStore):
    """Schemas read once (by the driver), as a store: what executors prepare from."""

    def __init__(self, stored: Mapping[str, str]) -> None:
        self.stored = dict(stored)

    async def all(self) -> dict[str, str]:
        return dict(self.stored)

    async def add(self, fingerprint: str, schema: str, check: Check) -> dict[str, str]:
        if fingerprint not in self.stored:
            check(self.stored)
            self.stored[fingerprint] = schema
        return dict(self.stored)


def lower(options: Mapping[str, str]) -> dict[str, str]:
    """Spark's option names are case-insensitive; so are ours."""
    return {k.lower(): v for k, v in options.items()}


def positive(options: Mapping[str, str], name: str, default: int) -> int:
    """Option ``name`` (lower case) as an integer >= 1."""
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise Misconfigured(f"option {name}={raw!r} must be a positive integer")
    return value


def boolean(options: Mapping[str, str], name: str, default: bool) -> bool:
    """Option ``name`` (lower case) as ``true`` or ``false`` (any case)."""
    raw = options.get(name)
    if raw is None:
        return default
    if str(raw).lower() in ("true", "false"):
        return str(raw).lower() == "true"
    raise Misconfigured(f"option {name}={raw!r} must be true or false")


def _difference(driver: tuple[Any, ...], here: tuple[Any, ...]) -> str:
    names = ("stream", "record", "partition_count", "serializer", "compressor")
    return ", ".join(
        f"{name} {a!r} on the driver, {b!r} here"
        for name, a, b in zip(names, driver, here, strict=True)
        if a != b
    )
