"""``runnel processor ...``: operations on a processor's consumer state."""

from __future__ import annotations

import click

from runnel.cli.common import load, load_plugins, plugin_option, run
from runnel.processor import Processor


@click.group()
def processor() -> None:
    """Inspect or change a processor's position in its stream."""


@processor.command()
@click.argument("target", metavar="MODULE:PROCESSOR")
@click.option(
    "--start",
    default="0",
    show_default=True,
    help="Stream id to restart from (0 = the beginning, $ = the end).",
)
@plugin_option
def reset(target: str, start: str, plugins: tuple[str, ...]) -> None:
    """Make the processor read every partition again from START.

    Pending (unacknowledged) events are forgotten. Stop the processor's workers first.
    """
    load_plugins(plugins)
    proc = load(target, Processor)
    if start not in ("0", "$") and not _is_stream_id(start):
        raise click.ClickException(
            f"--start {start!r} is not a stream id (0, $ or like 1526919030474-55)"
        )
    keys = [p.key for p in proc.stream.partitions]
    run(proc.app.transport.reset_group(keys, proc.name, start), proc.app)
    click.echo(f"reset {proc.name} on {len(keys)} partitions of {proc.stream.name} to {start}")


def _is_stream_id(value: str) -> bool:
    ms, dash, seq = value.partition("-")
    parts = [ms, seq] if dash else [ms]
    return all(p.isdigit() and int(p) < 2**64 for p in parts)
