"""``App``: where streams, processors and background jobs are declared."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ValidationError

from runnel.background import Job, validate_crontab
from runnel.codecs.resolve import resolve_serializer
from runnel.exceptions import Misconfigured
from runnel.interfaces import Middleware, Serializer
from runnel.plugins.manager import load_plugin
from runnel.processor import Processor
from runnel.record import Record
from runnel.settings import Settings
from runnel.stream import Stream
from runnel.transport import Transport, transport_for
from runnel.types import ExceptionPolicy

log = logging.getLogger("runnel.app")

F = TypeVar("F", bound=Callable[..., Any])

_PROCESSOR_SETTINGS = (
    "lock_expiry",
    "read_timeout",
    "prefetch_count",
    "assignment_attempts",
    "assignment_sleep",
    "grace_period",
    "pool_size",
    "join_delay",
)


def _one_line(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(x) for x in e['loc']).removeprefix('default_')}: {e['msg']}"
        for e in exc.errors()
    )


class App:
    """A Runnel application.

    ``App(name="myapp", redis_url="redis://...", **settings)``: any setting can be given as
    a keyword or as a ``RUNNEL_<NAME>`` environment variable (keywords win). ``plugins``
    registers extra plugin modules (or import paths) for this process.
    """

    def __init__(self, name: str, *, plugins: Iterable[Any] = (), **settings: Any) -> None:
        if not name or any(c in name for c in " .:{}"):
            raise Misconfigured(
                f"app name {name!r} must be non-empty without spaces, '.', ':' or braces"
            )
        self.name = name
        for plugin in plugins:
            load_plugin(plugin, source="App(plugins=...)")
        self.settings = Settings(**settings)
        self.streams: dict[str, Stream] = {}
        self.processors: dict[str, Processor] = {}
        self.jobs: list[Job] = []
        self._transport: Transport | None = None
        self._transport_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"<App {self.name}>"

    # The transport, made on first use in each event loop (connections belong to a loop).

    @property
    def transport(self) -> Transport:
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if self._transport is None or (loop is not None and loop is not self._transport_loop):
            self._transport = transport_for(self.settings.redis_url, self.settings)
            self._transport_loop = loop
        return self._transport

    async def aclose(self) -> None:
        if self._transport is not None:
            transport, self._transport = self._transport, None
            await transport.aclose()

    # Declarations.

    def stream(
        self,
        name: str,
        record: type[Record],
        partition_by: str | Callable[[Any], Any],
        partition_count: int | None = None,
        partition_size: int | None = None,
        serializer: Serializer | str | None = None,
        hasher: Callable[[Any], int] | None = None,
    ) -> Stream:
        """Declare a stream of ``record`` events, partitioned by ``partition_by``."""
        if not name or any(c in name for c in " :{}"):
            raise Misconfigured(
                f"stream name {name!r} must be non-empty without spaces, ':' or braces"
            )
        s = self.settings
        if not (isinstance(record, type) and issubclass(record, Record)):
            raise Misconfigured(
                f"stream {name!r}: record must be a Record subclass, not {record!r}"
            )
        stream = Stream(
            app=self,
            name=name,
            record=record,
            partition_by=partition_by,
            partition_count=s.default_partition_count
            if partition_count is None
            else partition_count,
            partition_size=s.default_partition_size if partition_size is None else partition_size,
            serializer=None
            if record.is_primitive()
            else resolve_serializer(serializer if serializer is not None else s.default_serializer),
            hasher=hasher or s.default_hasher,
        )
        existing = self.streams.get(name)
        if existing is not None and existing.partition_count != stream.partition_count:
            raise Misconfigured(f"stream {name!r} is already declared with another partition_count")
        self.streams[name] = stream
        return stream

    def processor(
        self,
        stream: Stream,
        *,
        exception_policy: ExceptionPolicy | str | None = None,
        middleware: Sequence[Middleware] = (),
        name: str | None = None,
        **options: Any,
    ) -> Callable[[F], F]:
        """Declare ``async def f(events)`` as a processor of ``stream``'s events."""
        unknown = set(options) - set(_PROCESSOR_SETTINGS)
        if unknown:
            raise Misconfigured(f"unknown processor options: {', '.join(sorted(unknown))}")
        if not isinstance(stream, Stream):
            raise Misconfigured(f"@app.processor needs a Stream, not {stream!r}")

        def decorate(func: F) -> F:
            if not asyncio.iscoroutinefunction(func):
                raise Misconfigured(f"processor {func.__qualname__} must be an async function")
            proc_name = name or func.__name__
            if any(c in proc_name for c in " .:{}"):
                raise Misconfigured(
                    f"processor name {proc_name!r} must not contain spaces, '.', ':' or braces"
                )
            if proc_name in self.processors:
                raise Misconfigured(f"a processor named {proc_name!r} is already declared")
            # Processor arguments are checked exactly like the default_* settings they override.
            overrides = {f"default_{k}": v for k, v in options.items()}
            if exception_policy is not None:
                overrides["default_exception_policy"] = exception_policy
            try:
                checked = Settings.model_validate({**self.settings.model_dump(), **overrides})
            except ValidationError as exc:
                raise Misconfigured(f"processor {proc_name!r}: {_one_line(exc)}") from None
            policy = checked.default_exception_policy
            values = {key: getattr(checked, f"default_{key}") for key in _PROCESSOR_SETTINGS}
            proc = Processor(
                app=self,
                stream=stream,
                func=func,
                name=proc_name,
                exception_policy=policy,
                middleware=list(middleware),
                **values,
            )
            for m in proc.middleware:
                check = getattr(m, "check_processor", None)
                if check is not None:
                    check(proc)
            self.processors[proc_name] = proc
            func.__runnel_processor__ = proc  # type: ignore[attr-defined]
            return func

        return decorate

    def task(self, func: F | None = None, *, on_leader: bool = False) -> Any:
        """Run ``func`` once when a worker starts (only on the leader if ``on_leader``)."""

        def decorate(f: F) -> F:
            self.jobs.append(Job(func=f, kind="task", on_leader=on_leader))
            return f

        return decorate(func) if func is not None else decorate

    def timer(self, *, interval: float, on_leader: bool = False) -> Callable[[F], F]:
        """Run the function every ``interval`` seconds while a worker runs."""
        if interval <= 0:
            raise Misconfigured("timer interval must be > 0 seconds")

        def decorate(f: F) -> F:
            self.jobs.append(Job(func=f, kind="timer", on_leader=on_leader, interval=interval))
            return f

        return decorate

    def crontab(
        self, spec: str, *, on_leader: bool = False, timezone: str | ZoneInfo | None = None
    ) -> Callable[[F], F]:
        """Run the function on a cron schedule (``"45 17 * * *"``) in ``timezone``."""
        try:
            validate_crontab(spec)
        except ValueError as exc:
            raise Misconfigured(str(exc)) from None
        try:
            tz = (
                timezone
                if isinstance(timezone, ZoneInfo)
                else ZoneInfo(timezone or self.settings.timezone)
            )
        except (ZoneInfoNotFoundError, ValueError):
            raise Misconfigured(f"unknown time zone {timezone!r}") from None

        def decorate(f: F) -> F:
            self.jobs.append(
                Job(func=f, kind="crontab", on_leader=on_leader, spec=spec, timezone=tz)
            )
            return f

        return decorate

    # Running.

    def autodiscover(self) -> list[str]:
        """Import the modules matching the ``autodiscover`` glob (so their decorators run)."""
        from runnel.discovery import autodiscover

        return autodiscover(self.settings.autodiscover) if self.settings.autodiscover else []

    async def run_worker(self, processors: Sequence[str] | None = None) -> int:
        """Run a worker in this process until stopped; return its exit code."""
        from runnel.processing.worker import Worker

        self.autodiscover()
        chosen = None
        if processors:
            missing = [p for p in processors if p not in self.processors]
            if missing:
                raise Misconfigured(
                    f"unknown processor(s): {', '.join(missing)} "
                    f"(app {self.name} has: {', '.join(self.processors) or 'none'})"
                )
            chosen = [self.processors[p] for p in processors]
        return await Worker(self, chosen).run()
