"""`runnel --help` lists every command without importing what the commands use (pydantic,
redis-py, the Avro libraries, the app's classes): what keeps the command line quick to
start. The start-up time itself is measured by benchmarks/startup.py, not asserted."""

from __future__ import annotations

import importlib
import subprocess
import sys

import click
import pytest

from runnel.cli import LAZY, cli

HEAVY = [
    "asyncio",
    "avro",
    "croniter",
    "fastavro",
    "msgpack",
    "opentelemetry",
    "pydantic",
    "pyspark",
    "redis",
    "runnel.app",
    "runnel.jobs",
    "starlette",
    "uvicorn",
]

PROBE = """
import atexit, sys
heavy = {heavy!r}
atexit.register(lambda: print(sorted(h for h in heavy if h in sys.modules), file=sys.stderr))
sys.argv = ["runnel", *{args!r}]
from runnel.cli import main
main()
"""


def loaded_by(*args: str) -> str:
    code = PROBE.format(heavy=HEAVY, args=list(args))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_help_imports_nothing_heavy() -> None:
    assert loaded_by("--help") == "[]"


def test_a_plugins_command_help_imports_nothing_heavy() -> None:
    """The plugins' commands are added to every command line: their modules stay light."""
    assert loaded_by("embedded", "--help") == "[]"
    assert loaded_by("avro", "--help") == "[]"


@pytest.mark.parametrize("name", sorted(LAZY))
def test_the_listed_help_is_the_commands_own(name: str) -> None:
    """LAZY's text is the first paragraph of the command's help, so `runnel --help` reads
    the same as if the command had been imported."""
    module, text = LAZY[name]
    command = getattr(importlib.import_module(module), name)
    assert isinstance(command, click.Command)
    assert " ".join((command.help or "").split("\n\n")[0].split()) == text


def test_a_lazy_command_runs_and_is_listed_once() -> None:
    context = click.Context(cli)
    names = cli.list_commands(context)
    assert len(names) == len(set(names)) and set(LAZY) <= set(names)
    assert cli.get_command(context, "status") is importlib.import_module("runnel.cli.status").status


def test_the_redis_plugin_names_the_cluster_schemes_as_the_layouts_do() -> None:
    from runnel_redis import layout, plugin

    assert plugin.CLUSTER_SCHEMES == layout.CLUSTER_SCHEMES


WORKER_PROBE = """
import sys
from runnel import App, Record
from runnel.runtime.worker import Worker

app = App(name="probe", redis_url="memory://")


class Ping(Record):
    key: str


pings = app.stream("pings", record=Ping, partition_by="key")


@app.processor(pings)
async def seen(events):
    async for _ in events.records():
        pass


Worker(app)
print(sorted(m for m in {heavy!r} if m in sys.modules))
"""


def test_a_worker_without_cron_or_metrics_imports_neither() -> None:
    """croniter is for cron schedules and prometheus_client for --metrics-port: a worker of
    an app that has neither starts without importing them (nor the Avro libraries)."""
    code = WORKER_PROBE.format(heavy=["croniter", "prometheus_client", "fastavro", "avro"])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
