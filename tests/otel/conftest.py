"""Fixtures of the tracing tests: a tracer provider of the test's own, exporting to memory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import runnel_otel


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for this test only (the global provider is left alone), every span kept."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runnel_otel.instrument(provider)
    try:
        yield exporter
    finally:
        runnel_otel.uninstrument()
        provider.shutdown()
