"""``runnel status``: who runs what, who leads, and how far behind each partition is, as
:func:`runnel.admin.status.status_report` reads it, printed as a table or JSON."""

from __future__ import annotations

import json

import click

from runnel.admin.status import QUARANTINED, status_report
from runnel.app import App
from runnel.commands import load, load_plugins, plugin_option, run
from runnel.text import plural


@click.command()
@click.argument("target", metavar="MODULE:APP")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@plugin_option
def status(target: str, as_json: bool, plugins: tuple[str, ...]) -> None:
    """Show each processor's workers, the partitions each owns, the leader, and each
    partition's lag (events not yet delivered), pending (delivered, not acknowledged) and
    state: owned, unowned, or QUARANTINED with the id of the event it stopped on, then
    "lost N" if N events were trimmed before the processor read them; and the length of
    each partition of a stream no processor reads.

    A stream whose partitions dropped records sent again (recognised by their identity)
    says how many."""
    load_plugins(plugins)
    app = load(target, App)
    report = run(status_report(app), app)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    layout = f"   key layout: {report['key_layout']}" if report.get("key_layout") else ""
    click.echo(f"app {report['app']}   leader: {report['leader'] or '-'}{layout}")
    for proc in report["processors"]:
        click.echo(
            f"\nprocessor {proc['name']}  (stream {proc['stream']}, "
            f"{plural(len(proc['partitions']), 'partition')})"
        )
        _duplicates(proc["duplicates_dropped"])
        if not proc["executors"]:
            click.echo("  no workers")
        for ex in proc["executors"]:
            state = "alive" if ex["alive"] else "NOT BEATING"
            parts = ",".join(map(str, ex["partitions"])) or "-"
            where = f"{ex['host']} pid {ex['pid']}"
            click.echo(f"  executor {ex['id']}  {where}  {state}  partitions {parts}")
        click.echo("  partition  owner          lag  pending  state")
        for p in proc["partitions"]:
            lag = "?" if p["lag"] is None else p["lag"]
            state = p["state"]
            if state == QUARANTINED:
                state += f" at {p['failing_id'] or '?'}"
            if p["lost"]:
                state += f"  lost {p['lost']}"
            click.echo(
                f"  {p['number']:>9}  {p['owner'] or '-':<12} {lag:>5}  {p['pending']:>7}  {state}"
            )
    for stream in report["streams"]:
        click.echo(
            f"\nstream {stream['name']}  "
            f"(no processor, {plural(len(stream['partitions']), 'partition')})"
        )
        _duplicates(stream["duplicates_dropped"])
        click.echo("  partition   length")
        for p in stream["partitions"]:
            length = "?" if p["length"] is None else p["length"]
            click.echo(f"  {p['number']:>9}  {length:>7}")


def _duplicates(count: int) -> None:
    if count:
        click.echo(f"  duplicates dropped: {count} (sent again, not appended twice)")
