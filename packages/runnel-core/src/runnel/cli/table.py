"""``runnel table ...``: a table's committed state (docs/state.md)."""

from __future__ import annotations

import json
from typing import Any

import click

from runnel.admin.tables import (
    parse_key,
    running_writers,
    table_entries,
    table_entry,
    tables_report,
)
from runnel.app import App
from runnel.commands import ask, load, load_plugins, plugin_option, run
from runnel.tables import TableBase, WindowedTable


@click.group()
def table() -> None:
    """Look at tables: their keys per partition, one key's value, every entry."""


def _table(target: str) -> TableBase:
    found = load(target, TableBase)
    return found.replaced_by or found  # the name of a table made windowed after


def _json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _number(value: float) -> str:
    """A number in full (a watermark is seconds since the epoch: ``:g`` would print
    ``1.764e+09``), without a ``.0`` when whole."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@table.command("list")
@click.argument("target", metavar="MODULE:APP")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@plugin_option
def list_tables(target: str, as_json: bool, plugins: tuple[str, ...]) -> None:
    """Show each table of the app, its source stream and its keys per partition."""
    load_plugins(plugins)
    app = load(target, App)
    report = run(tables_report(app), app)
    if as_json:
        click.echo(json.dumps({"app": app.name, "tables": report}, indent=2))
        return
    if not report:
        click.echo(f"app {app.name} declares no tables")
        return
    click.echo(f"{'table':<20} {'stream':<20} {'keys':>10}  per partition")
    for found in report:
        per = " ".join(str(p["keys"]) for p in found["partitions"])
        click.echo(f"{found['name']:<20} {found['stream']:<20} {found['keys']:>10}  {per}")
        windows = found.get("windows")
        if windows:
            shape = ", ".join(f"{k} {_number(v)}" for k, v in windows.items() if k != "kind")
            marks = " ".join(
                "-" if p["watermark"] is None else _number(p["watermark"])
                for p in found["partitions"]
            )
            click.echo(
                f"  {windows['kind']} windows ({shape}); late events {found['late']}; "
                f"watermark per partition {marks}"
            )


@table.command()
@click.argument("target", metavar="MODULE:TABLE")
@click.argument("key")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@plugin_option
def get(target: str, key: str, as_json: bool, plugins: tuple[str, ...]) -> None:
    """Print the committed value of KEY (read as JSON if it parses as JSON, else as text;
    always text for a table keyed by text). Exit code 1 if no value is stored: a table's
    default is not a stored value."""
    load_plugins(plugins)
    found = _table(target)
    declared = found.key_field
    entry = run(table_entry(found, parse_key(key, declared[1] if declared else None)), found.app)
    if as_json:
        click.echo(_json(entry))
    elif entry["stored"]:
        click.echo(_json(entry["value"]))
    else:
        where = f"table {found.name} (partition {entry['partition']})"
        if isinstance(found, WindowedTable):
            click.echo(f"key {_json(entry['key'])} has no windows in {where}", err=True)
        else:
            click.echo(
                f"key {_json(entry['key'])} is not stored in {where}; the table's default "
                f"is {_json(found.default)}",
                err=True,
            )
    if not entry["stored"]:
        click.get_current_context().exit(1)


@table.command()
@click.argument("target", metavar="MODULE:TABLE")
@click.option("--partition", type=click.IntRange(min=0), help="Only this partition.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@plugin_option
def dump(target: str, partition: int | None, as_json: bool, plugins: tuple[str, ...]) -> None:
    """Print every committed entry (partition, key, value), partition by partition."""
    load_plugins(plugins)
    found = _table(target)
    if partition is not None and partition >= found.source.partition_count:
        raise click.ClickException(
            f"stream {found.source.name} has partitions 0 to {found.source.partition_count - 1}"
        )

    async def collect() -> list[dict[str, Any]]:
        return [entry async for entry in table_entries(found, partition)]

    for entry in run(collect(), found.app):
        if as_json:
            click.echo(_json(entry))
        else:
            click.echo(f"{entry['partition']}\t{_json(entry['key'])}\t{_json(entry['value'])}")


@table.command()
@click.argument("target", metavar="MODULE:TABLE")
@click.option("--partition", type=click.IntRange(min=0), help="Only this partition.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help="Clear even while workers of its stream run.")
@plugin_option
def clear(
    target: str, partition: int | None, yes: bool, force: bool, plugins: tuple[str, ...]
) -> None:
    """Delete the table's committed state (of one partition, or all of it). Refused while
    workers of its stream's processors run, unless --force."""
    load_plugins(plugins)
    found = _table(target)
    if partition is not None and partition >= found.source.partition_count:
        raise click.ClickException(
            f"stream {found.source.name} has partitions 0 to {found.source.partition_count - 1}"
        )
    where = "all partitions" if partition is None else f"partition {partition}"
    app = found.app
    assert isinstance(app, App)

    async def clear_it() -> None:
        if not force:
            running = await running_writers(app, found)
            if running:
                raise click.ClickException(
                    f"workers of {', '.join(running)} are running: stop them first "
                    "(or give --force)"
                )
        question = f"clear table {found.name} ({where})?"
        if not yes and not ask(question, answer_with="give --yes to clear without being asked"):
            raise click.Abort()  # asked only once the clear would happen
        await found.clear(None if partition is None else [partition])

    run(clear_it(), found.app)
    click.echo(f"cleared table {found.name} ({where})")
