"""Which stream the options name, and the Redis that holds it, on the driver and executors.

A ``Stream`` cannot travel to executors (its app holds connections, ``partition_by`` may be
a lambda), so a :class:`Target` carries what names it: the import path, the Redis URL
resolved on the driver, and the writer schemas the driver loaded. Each executor process
imports the stream once and keeps one Redis client per URL.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from runnel.app import App
from runnel.exceptions import Misconfigured, SchemaIncompatible
from runnel.imports import import_object
from runnel.interfaces import Serializer
from runnel.stream import Stream
from runnel.transport import transport_for
from runnel_redis import embedded, keys

SCHEMES = ("redis", "rediss", "unix")

_streams: dict[tuple[str, str | None], Stream] = {}
_clients: dict[str, redis.Redis] = {}


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


def resolve_url(url: str) -> str:
    """A URL every executor can use: the embedded development server becomes its redis:// URL."""
    scheme = urlsplit(url).scheme
    if scheme == embedded.SCHEME:
        return embedded.ensure(url).url
    if scheme not in SCHEMES:
        raise Misconfigured(
            f"runnel-spark talks to Redis directly: url {url!r} must be redis://, rediss://, "
            f"unix:// or {embedded.SCHEME}://"
        )
    return url


def client(url: str) -> redis.Redis:
    """This process's synchronous client for ``url``.

    It never retries a command by itself: a MULTI/EXEC whose reply was lost may have been
    applied, and only the caller can say so.
    """
    found = _clients.get(url)
    if found is None:
        found = _clients[url] = redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0))
    return found


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
    """A stream and its Redis, as the driver resolved them; picklable."""

    stream_path: str
    app_path: str | None
    url: str
    signature: tuple[Any, ...]
    schemas: dict[str, str] | None = None
    chunk: int = 1000

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, redis_needed: bool = True) -> Target:
        """Read the options on the driver: import the stream, resolve its Redis URL."""
        options = lower(options)
        path = options.get("stream") or options.get("path")
        if not path:
            raise Misconfigured(
                "the runnel data source needs option stream=MODULE:STREAM "
                "(or app=MODULE:APP and stream=NAME)"
            )
        app_path = options.get("app") or None
        stream = load_stream(path, app_path)
        url = options.get("url") or stream.app.settings.redis_url
        return cls(
            stream_path=path,
            app_path=app_path,
            url=resolve_url(url) if redis_needed else url,
            signature=_signature(stream),
            chunk=positive(options, "chunksize", 1000),
        )

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
        if self.schemas:
            load = getattr(stream.serializer, "load_schemas", None)
            if load is not None:
                load(self.schemas)
        return stream

    def client(self) -> redis.Redis:
        return client(self.url)

    def key(self, stream: Stream, number: int) -> str:
        return keys.partition(stream.app.name, stream.name, number)

    def refresh_schemas(self, stream: Stream) -> bool:
        """Load the writer schemas stored since the driver looked; False if none are new."""
        load = getattr(stream.serializer, "load_schemas", None)
        if load is None:
            return False
        # redis-py types replies as bytes | str; this client (no decode_responses) gives bytes.
        raw = cast(
            dict[bytes, bytes], self.client().hgetall(keys.schemas(stream.app.name, stream.name))
        )
        stored = {k.decode(): v.decode() for k, v in raw.items()}
        before = dict(getattr(stream.serializer, "stored", {}))
        load(stored)
        return dict(getattr(stream.serializer, "stored", {})) != before

    # On the driver.

    def prepare(self, *, writing: bool) -> None:
        """Let the stream's serializer check and store (writing) or load (reading) its
        schemas, once on the driver; executors get what was loaded."""
        stream = load_stream(self.stream_path, self.app_path)
        serializer = stream.serializer
        if serializer is None or type(serializer).prepare is Serializer.prepare:
            return  # no stored schemas

        async def run() -> None:
            transport = transport_for(self.url, stream.app.settings)
            try:
                store = transport.schema_store(stream.app.name, stream.name)
                await serializer.prepare(store, writing=writing)
            finally:
                await transport.aclose()

        try:
            asyncio.run(run())
        except SchemaIncompatible as exc:
            raise SchemaIncompatible(f"stream {stream.id!r}: {exc}") from None
        stored = getattr(serializer, "stored", None)
        self.schemas = dict(stored) if stored else None


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


def _difference(driver: tuple[Any, ...], here: tuple[Any, ...]) -> str:
    names = ("stream", "record", "partition_count", "serializer", "compressor")
    return ", ".join(
        f"{name} {a!r} on the driver, {b!r} here"
        for name, a, b in zip(names, driver, here, strict=True)
        if a != b
    )
