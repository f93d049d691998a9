"""``runnel status``: who runs what, who leads, and how far behind each partition is."""

from __future__ import annotations

import json
from typing import Any

import click

from runnel.app import App
from runnel.cli.common import load, load_plugins, plugin_option, run
from runnel.exceptions import Misconfigured
from runnel.store.backend import admin_of
from runnel.store.coordination import Quarantine
from runnel.store.log import PartitionId
from runnel.stream import Stream


@click.command()
@click.argument("target", metavar="MODULE:APP")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@plugin_option
def status(target: str, as_json: bool, plugins: tuple[str, ...]) -> None:
    """Show each processor's workers, the partitions each owns, the leader, and each
    partition's lag (events not yet delivered), pending (delivered, not acknowledged) and
    state: owned, unowned, or QUARANTINED with the id of the event it stopped on, then
    "lost N" if N events were trimmed before the processor read them; and the length of
    each partition of a stream no processor reads."""
    load_plugins(plugins)
    app = load(target, App)
    report = run(_gather(app), app)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    layout = f"   key layout: {report['key_layout']}" if report.get("key_layout") else ""
    click.echo(f"app {report['app']}   leader: {report['leader'] or '-'}{layout}")
    for proc in report["processors"]:
        click.echo(
            f"\nprocessor {proc['name']}  (stream {proc['stream']}, "
            f"{len(proc['partitions'])} partitions)"
        )
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
            f"\nstream {stream['name']}  (no processor, {len(stream['partitions'])} partitions)"
        )
        click.echo("  partition   length")
        for p in stream["partitions"]:
            length = "?" if p["length"] is None else p["length"]
            click.echo(f"  {p['number']:>9}  {length:>7}")


QUARANTINED = "QUARANTINED"


def _state(owner: str | None, quarantine: Quarantine | None) -> str:
    if quarantine is not None:
        return QUARANTINED
    return "owned" if owner else "unowned"


async def _gather(app: App) -> dict[str, Any]:
    store = app.store
    admin = admin_of(store)
    report: dict[str, Any] = {
        "app": app.name,
        "leader": await store.leadership(app.name).leader(),
        "key_layout": store.key_layout,
        "processors": [],
        "streams": [],
    }
    for proc in app.processors.values():
        stream = proc.stream
        coord = store.coordination(app.name, stream.name, proc.name)
        members = await coord.members()
        alive = await coord.alive(list(members))
        keys = [p.id for p in stream.partitions]
        owners = await coord.lock_owners(keys)
        backlog = await admin.backlog(keys, proc.name)
        lost = await store.log.lost(keys, proc.name)
        quarantined = await coord.quarantined()
        report["processors"].append(
            {
                "name": proc.name,
                "stream": stream.name,
                "executors": [
                    {
                        "id": ex_id,
                        "host": info.host,
                        "pid": info.pid,
                        "alive": ex_id in alive,
                        "partitions": info.partitions,
                    }
                    for ex_id, info in sorted(members.items())
                ],
                "partitions": [
                    {
                        "number": key.number,
                        "owner": owners.get(key),
                        "lag": backlog[key][0],
                        "pending": backlog[key][1],
                        "lost": lost[key],
                        "state": _state(owners.get(key), quarantined.get(key)),
                        "failing_id": q.id if (q := quarantined.get(key)) else None,
                    }
                    for key in keys
                ],
            }
        )
    read = {proc.stream.name for proc in app.processors.values()}
    for stream in app.streams.values():
        if stream.name not in read:
            report["streams"].append(await _unread(app, stream))
    return report


async def _unread(app: App, stream: Stream) -> dict[str, Any]:
    """A stream no processor reads: how much each partition holds (what sending it put
    there, less any trimming), the one number that shows whether a send went in."""
    keys = [p.id for p in stream.partitions]
    try:
        lengths: dict[PartitionId, int | None] = dict(await admin_of(app.store).lengths(keys))
    except Misconfigured:  # a store that cannot count
        lengths = dict.fromkeys(keys)
    return {
        "name": stream.name,
        "partitions": [{"number": key.number, "length": lengths[key]} for key in keys],
    }


async def status_report(app: App) -> dict[str, Any]:
    """What ``runnel status --json`` prints, for other views of it (the dashboard)."""
    return await _gather(app)
