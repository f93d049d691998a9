"""``runnel dashboard MODULE:APP``: serve the live page of an app."""

from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING

import click

from runnel.commands import failure, load, load_plugins, plugin_option, run
from runnel.exceptions import Unavailable

if TYPE_CHECKING:
    from runnel.app import App

# The app's classes and the page's code are imported when the command runs: the plugin
# adds it to every `runnel` command line.


@click.command()
@click.argument("target", metavar="MODULE:APP")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="The port to listen on (0: any free one, printed).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address to listen on; anything but loopback shows the app to the network.",
)
@click.option(
    "--allow-actions",
    is_flag=True,
    help="Show replay and purge buttons for dead jobs (read-only without it).",
)
@click.option(
    "--sample-every",
    type=click.FloatRange(0.1, 3600),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="How often the throughput history is sampled.",
)
@click.option(
    "--history-hours",
    type=click.FloatRange(0.001, 24 * 31),
    default=24.0,
    show_default=True,
    metavar="HOURS",
    help="How long the history kept in the store reaches back (one sample per interval).",
)
@plugin_option
def dashboard(
    target: str,
    port: int,
    host: str,
    allow_actions: bool,
    sample_every: float,
    history_hours: float,
    plugins: tuple[str, ...],
) -> None:
    """Serve a web page that shows, live, the app's processors, their workers and
    partitions (owner, lag, pending), the leader, the job queue and its dead letters."""
    import uvicorn

    from runnel_dashboard.server import Options, create_app

    load_plugins(plugins)
    from runnel.app import App

    app = load(target, App)
    away = run(_first_look(app), app)  # refused credentials: one Error: line, exit 1
    sock = _listen(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    mode = "actions allowed" if allow_actions else "read-only"
    click.echo(f"dashboard of app {app.name} on http://{shown}:{bound_port}/ ({mode})")
    if away is not None:
        click.echo(f"warning: {away}; the page says so until it answers", err=True)
    options = Options(
        allow_actions=allow_actions,
        loopback_only=_loopback(host),
        sample_every=sample_every,
        history_hours=history_hours,
    )
    config = uvicorn.Config(
        create_app(app, options), log_level="warning", access_log=False, lifespan="on"
    )
    server = uvicorn.Server(config)
    import asyncio

    try:
        asyncio.run(server.serve(sockets=[sock]))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()


async def _first_look(app: App) -> str | None:
    """Read what the page shows once before serving, as every command reads the store
    before it does anything: a refused password or permission fails the start (raised,
    for ``run`` to make one line). A Redis that does not answer does not: the page
    reports it until it does, so this returns what to warn about."""
    try:
        from runnel_dashboard.snapshot import snapshot

        await snapshot(app)
    except Unavailable as exc:
        return failure(app, exc)
    return None


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket, so that a taken port or a bad address is one clear line."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise click.ClickException(f"--host {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise click.ClickException(f"cannot listen on {host} port {port}: {exc.strerror}") from None
    sock.set_inheritable(True)
    return sock


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
