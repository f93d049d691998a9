"""OpenTelemetry tracing for Runnel, as a plugin (``runnel-otel``, found by entry point).

Tracing is on once a tracer provider is known: :func:`instrument` was called, a global
SDK provider was set (``trace.set_tracer_provider``, ``opentelemetry-instrument``), or
``OTEL_TRACES_EXPORTER`` names an exporter (the plugin then sets one up). Otherwise every
hook answers "nothing to do" and the trace context is stored nowhere. See docs/tracing.md.
"""

from runnel_otel.config import instrument, tracer, uninstrument

__all__ = ["instrument", "tracer", "uninstrument"]
