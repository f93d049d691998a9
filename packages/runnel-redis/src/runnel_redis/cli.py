"""``runnel embedded``: look after the project's embedded development redis-server."""

from __future__ import annotations

from pathlib import Path

import click

from runnel.exceptions import RunnelError
from runnel_redis import embedded as server

URL_HELP = "Which embedded server (default: this project's)."


@click.group()
def embedded() -> None:
    """The project's embedded development redis-server."""


@embedded.command()
@click.option("--url", default="redis+embedded://", show_default=True, help=URL_HELP)
def start(url: str) -> None:
    """Start the server (or find it running) and print its redis:// URL."""
    try:
        click.echo(server.ensure(url).url)
    except RunnelError as exc:
        raise click.ClickException(str(exc)) from None


@embedded.command()
@click.option("--url", default="redis+embedded://", show_default=True, help=URL_HELP)
def status(url: str) -> None:
    """Say whether the server is running, and where."""
    directory = _directory(url)
    found = server.running(directory)
    if found is None:
        click.echo(f"not running ({directory})")
        raise SystemExit(1)
    click.echo(f"running: {found.url} pid {found.pid} ({directory})")


@embedded.command()
@click.option("--url", default="redis+embedded://", show_default=True, help=URL_HELP)
def stop(url: str) -> None:
    """Stop the server; its data stays in the directory for next time."""
    directory = _directory(url)
    click.echo("stopped" if server.stop(directory) else f"not running ({directory})")


def _directory(url: str) -> Path:
    """The state directory of an embedded URL; any other URL is one line of error."""
    try:
        return server.state_dir(url)
    except RunnelError as exc:
        raise click.ClickException(
            f"{exc}: --url takes a redis+embedded:// URL (the embedded dev server)"
        ) from None
