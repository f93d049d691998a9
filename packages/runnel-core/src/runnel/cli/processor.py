"""``runnel processor ...``: operations on a processor's consumer state."""

from __future__ import annotations

import sys

import click

from runnel.admin.quarantine import resume_partitions, skip_event
from runnel.commands import ask, load, load_plugins, plugin_option, run
from runnel.exceptions import RunnelError
from runnel.processor import Processor
from runnel.store.backend import admin_of
from runnel.store.coordination import Coordination
from runnel.text import plural

CLI_ID = "cli"
"""Who the control messages sent by these commands come from."""


@click.group()
def processor() -> None:
    """Inspect or change a processor's position in its stream, or its quarantines."""


def _coordination(proc: Processor) -> Coordination:
    return proc.app.store.coordination(proc.app.name, proc.stream.name, proc.name)


@processor.command()
@click.argument("target", metavar="MODULE:PROCESSOR")
@click.option(
    "--start",
    default="0",
    show_default=True,
    help="Stream id to restart from (0 = the beginning, $ = the end).",
)
@click.option("--force", is_flag=True, help="Reset even while workers of the processor run.")
@click.option(
    "--clear-tables",
    "tables",
    flag_value="clear",
    help="Also clear the tables of the processor's stream (their state starts empty).",
)
@click.option(
    "--keep-tables",
    "tables",
    flag_value="keep",
    help="Keep the tables' state: events read again are applied on top of it.",
)
@plugin_option
def reset(
    target: str, start: str, force: bool, tables: str | None, plugins: tuple[str, ...]
) -> None:
    """Make the processor read every partition again from START.

    Pending (unacknowledged) events are forgotten and quarantines lifted. Refused while
    workers of the processor are alive, unless --force. The tables of its stream keep their
    state unless --clear-tables: without either option, a terminal is asked, and anything
    else is told, what happens to them.
    """
    load_plugins(plugins)
    proc = load(target, Processor)
    if start not in ("0", "$") and not _is_stream_id(start):
        raise click.ClickException(
            f"--start {start!r} is not a stream id (0, $ or like 1526919030474-55)"
        )
    declared = [t.name for t in proc.stream.tables]
    keys = [p.id for p in proc.stream.partitions]

    async def reset_all() -> str | None:
        coordination = _coordination(proc)
        if not force:
            members = await coordination.members()
            alive = sorted(await coordination.alive(list(members)))
            if alive:
                where = ", ".join(
                    f"{ex} ({members[ex].host} pid {members[ex].pid})" for ex in alive
                )
                raise RunnelError(
                    f"workers of {proc.name} are running: {where}; stop them first "
                    "(or give --force)"
                )
        # Only a reset that will happen asks (or tells) what becomes of the tables.
        chosen = _tables_choice(proc, declared, tables)
        await admin_of(proc.app.store).reset_group(keys, proc.name, start)
        await coordination.lift(None, CLI_ID)
        if chosen == "clear":
            for table in proc.stream.tables:
                await table.clear()
        return chosen

    chosen = run(reset_all(), proc.app)
    click.echo(
        f"reset {proc.name} on {plural(len(keys), 'partition')} of {proc.stream.name} to {start}"
    )
    if chosen == "clear" and declared:
        click.echo(f"cleared tables {', '.join(declared)}")


def _tables_choice(proc: Processor, declared: list[str], given: str | None) -> str | None:
    """``clear`` or ``keep``: as given, else asked on a terminal, else kept (and said so)."""
    if not declared or given is not None:
        return given
    names = ", ".join(declared)
    if sys.stdin.isatty():
        clear = ask(
            f"tables {names} of stream {proc.stream.name} keep their state unless cleared: "
            "clear them too?",
            answer_with="give --clear-tables or --keep-tables",
        )
        return "clear" if clear else "keep"
    click.echo(
        f"tables {names} of stream {proc.stream.name} keep their state: the events "
        "read again are applied on top of it (--clear-tables clears them)",
        err=True,
    )
    return "keep"


@processor.command()
@click.argument("target", metavar="MODULE:PROCESSOR")
@click.option("--partition", "number", type=int, required=True, help="The partition number.")
@click.option("--id", "xid", required=True, help="The entry id of the event to skip.")
@plugin_option
def skip(target: str, number: int, xid: str, plugins: tuple[str, ...]) -> None:
    """Acknowledge one event without processing it (a poison event of a quarantined
    partition) and let the partition go on after it.

    Refused unless ID is the oldest unacknowledged event of the partition for this
    processor: nothing else is ever skipped.
    """
    load_plugins(plugins)
    proc = load(target, Processor)
    if not 0 <= number < proc.stream.partition_count:
        raise click.ClickException(
            f"--partition {number}: {proc.stream.name} has partitions 0 to "
            f"{proc.stream.partition_count - 1}"
        )
    if not _is_stream_id(xid):
        raise click.ClickException(f"--id {xid!r} is not a stream id (like 1526919030474-55)")
    run(skip_event(proc, number, xid, CLI_ID), proc.app)
    click.echo(f"skipped {xid} on partition {number} of {proc.name}; the partition resumes")


@processor.command()
@click.argument("target", metavar="MODULE:PROCESSOR")
@click.option("--partition", "number", type=int, default=None, help="Only this partition.")
@plugin_option
def resume(target: str, number: int | None, plugins: tuple[str, ...]) -> None:
    """Lift the quarantine of the processor's partitions (or of one): their workers start
    them again, from the event that failed, without a restart."""
    load_plugins(plugins)
    proc = load(target, Processor)
    lifted = run(resume_partitions(proc, number, CLI_ID), proc.app)
    if not lifted:
        which = "" if number is None else f" partition {number} of"
        click.echo(f"nothing to resume:{which} {proc.name} is not quarantined")
        return
    click.echo(f"resumed partitions {', '.join(map(str, lifted))} of {proc.name}")


def _is_stream_id(value: str) -> bool:
    ms, dash, seq = value.partition("-")
    parts = [ms, seq] if dash else [ms]
    return all(p.isdigit() and int(p) < 2**64 for p in parts)
