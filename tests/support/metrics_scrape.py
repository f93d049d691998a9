"""Reading a worker's ``/metrics`` the way Prometheus does: over HTTP, parsed."""

from __future__ import annotations

import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

Samples = list[tuple[str, dict[str, str], float]]


def scrape(port: int) -> Samples:
    """Every sample served on http://127.0.0.1:port/metrics (empty if not serving yet)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
    except OSError:
        return []
    return [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def total(samples: Samples, name: str, **labels: Any) -> float:
    """The sum of the samples called ``name`` whose labels include ``labels``."""
    want = {k: str(v) for k, v in labels.items()}
    return sum(
        value
        for sample, got, value in samples
        if sample == name and all(got.get(k) == v for k, v in want.items())
    )


def present(samples: Samples, name: str) -> bool:
    return any(sample == name for sample, _, _ in samples)
