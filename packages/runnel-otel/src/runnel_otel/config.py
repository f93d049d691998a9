"""When tracing is on, and with which tracer: decided once per provider, cheaply checked.

OpenTelemetry is imported at the first check, not with this module: every ``runnel``
command loads the plugin, and ``runnel --help`` must stay light (some releases of
opentelemetry-api import asyncio)."""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry import trace as trace_api

trace: Any = None  # opentelemetry.trace, once _configure_from_env has run

log = logging.getLogger("runnel.otel")

NAME = "runnel_otel"
EXPORTERS = ("otlp", "console")

_lock = threading.Lock()
_explicit: trace_api.TracerProvider | None = None
_instrumented = False
_from_env_done = False
_cached: tuple[object, trace_api.Tracer] | None = None


def instrument(tracer_provider: trace_api.TracerProvider | None = None) -> None:
    """Trace Runnel with ``tracer_provider`` (default: the global one, whatever is set)."""
    global _explicit, _instrumented, _cached
    with _lock:
        _explicit, _instrumented, _cached = tracer_provider, True, None


def uninstrument() -> None:
    """Stop tracing through :func:`instrument`; a global SDK provider still turns it on."""
    global _explicit, _instrumented, _cached
    with _lock:
        _explicit, _instrumented, _cached = None, False, None


def tracer() -> trace_api.Tracer | None:
    """The tracer to use, or None when tracing is off (no provider is configured)."""
    if not _from_env_done:
        _configure_from_env()
    if not _instrumented and getattr(trace, "_TRACER_PROVIDER", False) is None:
        # Off, and no global provider set yet: answered without get_tracer_provider(),
        # which looks in os.environ on every call (a hook runs for each job and send).
        return None
    provider = _explicit if _explicit is not None else trace.get_tracer_provider()
    if not _instrumented and isinstance(
        provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider
    ):
        return None  # nobody set a provider: spans would go nowhere
    cached = _cached
    if cached is not None and cached[0] is provider:
        return cached[1]
    return _remember(provider)


def _remember(provider: trace_api.TracerProvider) -> trace_api.Tracer:
    global _cached
    from importlib.metadata import version

    made = provider.get_tracer(NAME, version("runnel-otel"))
    _cached = (provider, made)
    return made


def _configure_from_env() -> None:
    """``OTEL_TRACES_EXPORTER=otlp`` (or ``console``, or both, comma-separated) with no
    provider set: set a global SDK provider that exports there, configured by the usual
    ``OTEL_*`` variables (service name, endpoint, headers, sampler)."""
    global _from_env_done, trace
    with _lock:
        if _from_env_done:
            return
        from opentelemetry import trace as imported

        trace = imported
        _from_env_done = True
        # A provider named by OTEL_PYTHON_TRACER_PROVIDER is loaded now, once.
        trace.get_tracer_provider()
        wanted = [
            name.strip().lower()
            for name in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",")
            if name.strip()
        ]
        if not wanted or wanted == ["none"]:
            return
        if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return
        if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            return  # the app (or opentelemetry-instrument) set one: use that
        unknown = [name for name in wanted if name not in EXPORTERS]
        if unknown:
            log.warning(
                "OTEL_TRACES_EXPORTER: runnel-otel sets up only %s, not %s; tracing is off",
                " and ".join(EXPORTERS),
                ", ".join(unknown),
            )
            return
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

        provider = TracerProvider(resource=Resource.create())
        for name in wanted:
            exporter: SpanExporter
            if name == "otlp":
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )

                exporter = OTLPSpanExporter()
            else:
                from opentelemetry.sdk.trace.export import ConsoleSpanExporter

                exporter = ConsoleSpanExporter()
            provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
