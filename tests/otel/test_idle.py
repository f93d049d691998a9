"""runnel-otel installed with tracing off costs a job, a send or an enqueue next to
nothing: its hooks answer None without asking OpenTelemetry for the global provider (which
reads os.environ on every call), and stay right once a provider is set."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import runnel_otel
from runnel.plugins.instruments import instruments

asked = []
real = trace.get_tracer_provider
def counted():
    asked.append(1)
    return real()
trace.get_tracer_provider = counted

running = instruments().job_running
assert running is not None  # the plugin is installed: its hook is called
for _ in range(100):
    assert running(job=None, delivery=None, headers={}) == []
print(len(asked))
trace.set_tracer_provider(TracerProvider())
print(runnel_otel.tracer() is not None)
"""


def test_off_a_hook_does_not_look_up_the_global_provider_each_time(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    looked_up, on_once_set = done.stdout.split()
    assert int(looked_up) <= 1  # once, when the plugin reads its environment
    assert on_once_set == "True"
