"""Reading and writing the W3C trace context where Runnel keeps it: a stream entry's
fields (bytes) and a job's headers (text)."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import Getter

FIELDS = (b"traceparent", b"tracestate")
"""The entry fields the W3C trace context goes in (beside a record's ``data`` field)."""


class _BytesGetter(Getter[Mapping[bytes, bytes]]):
    """Entry fields are bytes on both sides."""

    def get(self, carrier: Mapping[bytes, bytes], key: str) -> list[str] | None:
        value = carrier.get(key.encode())
        if value is None:
            return None
        return [value.decode("latin-1") if isinstance(value, bytes) else str(value)]

    def keys(self, carrier: Mapping[bytes, bytes]) -> list[str]:
        return [k.decode("latin-1") for k in carrier]


BYTES = _BytesGetter()


def inject_fields(fields: dict[bytes, bytes], ctx: otel_context.Context) -> None:
    """Put ``ctx``'s trace context (the configured propagators') in an entry's fields."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=ctx)
    for key, value in carrier.items():
        fields[key.encode()] = value.encode()


def from_fields(fields: Mapping[bytes, bytes]) -> otel_context.Context | None:
    """The context an entry carries, or None if it carries none (sent untraced)."""
    if b"traceparent" not in fields:
        return None
    return propagate.extract(fields, getter=BYTES)


def link_of(fields: Mapping[bytes, bytes]) -> trace.Link | None:
    """A link to the span that sent the entry, if it carries one."""
    ctx = from_fields(fields)
    if ctx is None:
        return None
    span_context = trace.get_current_span(ctx).get_span_context()
    return trace.Link(span_context) if span_context.is_valid else None
