"""``runnel dashboard MODULE:APP``: serve the live page of an app."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import click

from runnel import logs
from runnel.commands import failure, load, load_plugins, plugin_option, run
from runnel.exceptions import Unavailable
from runnel_dashboard.access import BASIC_AUTH_ENV, TOKEN_ENV, Access, parse_basic
from runnel_dashboard.audit import Audit

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
    help="Show the action buttons (replay, purge, cancel, retry, skip, resume); "
    "read-only without it.",
)
@click.option(
    "--token",
    envvar=TOKEN_ENV,
    show_envvar=True,
    metavar="TOKEN",
    help="Require this token on every request (open /?token=TOKEN once, or send "
    "'Authorization: Bearer TOKEN'); the variable keeps it out of ps.",
)
@click.option(
    "--basic-auth",
    "basic_auth",
    envvar=BASIC_AUTH_ENV,
    show_envvar=True,
    metavar="USER:PASSWORD",
    help="Require HTTP basic auth with these credentials on every request; the "
    "variable keeps them out of ps.",
)
@click.option(
    "--public-read-only",
    is_flag=True,
    help="Serve a --host other than loopback without --token or --basic-auth, read-only "
    "(refused without it).",
)
@click.option(
    "--audit-log",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Append one JSON line per action request (who, action, target, outcome) to FILE.",
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
    token: str | None,
    basic_auth: str | None,
    public_read_only: bool,
    audit_log: Path | None,
    sample_every: float,
    history_hours: float,
    plugins: tuple[str, ...],
) -> None:
    """Serve a web page that shows, live, the app's processors, their workers and
    partitions (owner, lag, pending), the leader, the job queue, its jobs and dead
    letters; with --allow-actions, buttons that act on them."""
    import uvicorn

    from runnel_dashboard.server import Options, create_app

    access = _access(token, basic_auth)
    loopback = _loopback(host)
    if public_read_only and allow_actions:
        raise click.ClickException("--public-read-only and --allow-actions contradict each other")
    if not loopback and not access.required and not public_read_only:
        raise click.ClickException(
            f"--host {host} is not loopback: require credentials with --token or "
            "--basic-auth, or pass --public-read-only to serve it read-only to anyone"
        )
    if not loopback and not access.required and allow_actions:
        raise click.ClickException("--allow-actions off loopback needs --token or --basic-auth")
    audit = Audit(_audit_file(audit_log))
    load_plugins(plugins)
    from runnel.app import App

    app = load(target, App)
    away = run(_first_look(app), app)  # refused credentials: one Error: line, exit 1
    sock = _listen(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    mode = "actions allowed" if allow_actions else "read-only"
    if access.required:
        kinds = [k for k, on in (("token", access.token), ("basic auth", access.user)) if on]
        mode += f", {' or '.join(kinds)} required"
    click.echo(f"dashboard of app {app.name} on http://{shown}:{bound_port}/ ({mode})")
    if away is not None:
        click.echo(f"warning: {away}; the page says so until it answers", err=True)
    logs.configure("warning")  # and the audit lines (audit.py)
    options = Options(
        allow_actions=allow_actions,
        loopback_only=loopback,
        sample_every=sample_every,
        history_hours=history_hours,
        access=access,
        audit=audit,
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


def _access(token: str | None, basic_auth: str | None) -> Access:
    """The credentials asked for; a malformed one is an error that does not show it."""
    if token is not None and not token.strip():
        raise click.ClickException(f"--token (or {TOKEN_ENV}) is empty")
    user = password = None
    if basic_auth is not None:
        pair = parse_basic(basic_auth)
        if pair is None:
            raise click.ClickException(
                f"--basic-auth (or {BASIC_AUTH_ENV}) must be USER:PASSWORD, both non-empty"
            )
        user, password = pair
    return Access(token=token, user=user, password=password)


def _audit_file(path: Path | None) -> Path | None:
    """The audit log, opened once to append, so that one that cannot be written is an
    error now and not at the first action."""
    if path is not None:
        try:
            path.open("a", encoding="utf-8").close()
        except OSError as exc:
            raise click.ClickException(f"--audit-log {path}: {exc.strerror}") from None
    return path


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
