"""The ``runnel`` command line."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from runnel import __version__, commands
from runnel.cli.missing import avro, dashboard, spark
from runnel.commands import load_plugins, plugin_option

LAZY: dict[str, tuple[str, str]] = {
    "acl": (
        "runnel.cli.acl",
        "Print the commands that give the store user USER exactly the keys and commands the "
        "app needs (every feature: streams, processors, tables, jobs, the dashboard, the "
        "CLI, Spark), one a line, for the store's own client (redis-cli). The password is a "
        "placeholder, PASSWORD, to replace; a password in the URL is never printed.",
    ),
    "dead": (
        "runnel.cli.dead",
        "List, replay or purge a stream's dead letters (DeadLetterMiddleware's sink).",
    ),
    "jobs": (
        "runnel.cli.jobs",
        "The app's job queue: counts, one job, dead letters; enqueue or cancel a job.",
    ),
    "plugins": (
        "runnel.cli.plugins",
        "List every loaded plugin: where it came from and what it provides.",
    ),
    "processor": (
        "runnel.cli.processor",
        "Inspect or change a processor's position in its stream, or its quarantines.",
    ),
    "send": (
        "runnel.cli.send",
        "Send one event, given as a JSON object, to the stream MODULE:STREAM.",
    ),
    "sendmany": (
        "runnel.cli.send",
        "Send the events of a JSON-lines file (one JSON object per line; - for stdin).",
    ),
    "settings": (
        "runnel.cli.settings",
        "List every setting of App(...): its RUNNEL_* environment variable and its default.",
    ),
    "status": (
        "runnel.cli.status",
        "Show each processor's workers, the partitions each owns, the leader, and each "
        "partition's lag (events not yet delivered), pending (delivered, not acknowledged) "
        "and state: owned, unowned, or QUARANTINED with the id of the event it stopped on, "
        'then "lost N" if N events were trimmed before the processor read them; and the '
        "length of each partition of a stream no processor reads.",
    ),
    "table": (
        "runnel.cli.table",
        "Look at tables: their keys per partition, one key's value, every entry.",
    ),
    "worker": (
        "runnel.cli.worker",
        "Run a worker for the app MODULE:APP until SIGINT/SIGTERM: its processors, its job "
        "queue and its background tasks.",
    ),
}
"""Runnel's own commands: the module each is in, and the start of its help, enough for
``runnel --help`` to list it without importing it (tests/unit/test_cli_lazy.py checks
both). A command's module is imported when it runs or shows its own help."""


class LazyGroup(click.Group):
    """The ``runnel`` group: its own commands are imported on first use, so that ``runnel
    --help`` and every command start without importing the others (pydantic, the job
    queue and the admin code take most of a second to import on a small machine)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, tuple[str, str]] = dict(LAZY)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module = importlib.import_module(self.lazy.pop(cmd_name)[0])
            super().add_command(getattr(module, cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        super().add_command(cmd, name)
        self.lazy.pop(name or cmd.name or "", None)  # a plugin's command of the same name wins

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            if name in self.lazy:
                # Shortened by click's own rule, as the command's help would be.
                text = click.Command(name, help=self.lazy[name][1]).get_short_help_str(limit)
            else:
                command = self.commands[name]
                if command.hidden:
                    continue
                text = command.get_short_help_str(limit)
            rows.append((name, text))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _print_versions(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``runnel --version``: core's version, then each plugin distribution's, one a line,
    so that a bug report names every version that ran (docs/cli.md)."""
    if not value or ctx.resilient_parsing:
        return
    from runnel.plugins.inventory import distributions

    click.echo(f"runnel {__version__}")
    for name, version in distributions():
        click.echo(f"{name} {version}")
    ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_versions,
    help="Print the versions of runnel and of each installed plugin, and exit.",
)
@plugin_option
@click.option("--traceback", "show_stack", is_flag=True, help="Print the whole stack of any error.")
def cli(plugins: tuple[str, ...], show_stack: bool) -> None:
    """Runnel: partitioned, ordered event processing and a job queue on Redis Streams."""
    commands.show_traceback = show_stack
    # main() loaded these already, so that their commands exist; this covers other callers.
    load_plugins(plugins)


def _plugin_args(argv: list[str]) -> list[str]:
    found = []
    for i, arg in enumerate(argv):
        if arg == "--plugin" and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif arg.startswith("--plugin="):
            found.append(arg.split("=", 1)[1])
    return found


# Replaced by the plugins' own commands where those are installed.
cli.add_command(avro)
cli.add_command(spark)
cli.add_command(dashboard)


def main() -> None:
    from runnel.plugins.manager import add_commands, load_plugin

    # Plugins named with --plugin may add commands, so load them before parsing.
    for name in _plugin_args(sys.argv[1:]):
        try:
            load_plugin(name, source="--plugin")
        except Exception as exc:  # a plugin's own code failed to import
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)
    try:
        add_commands(cli)
    except Exception as exc:  # a plugin's command registration failed
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    cli(prog_name="runnel")
