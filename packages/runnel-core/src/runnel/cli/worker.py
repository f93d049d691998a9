"""``runnel worker``."""

from __future__ import annotations

import asyncio
import logging
import sys

import click

from runnel import logs
from runnel.app import App
from runnel.cli.common import load, load_plugins, plugin_option
from runnel.exceptions import RunnelError


@click.command()
@click.argument("target", metavar="MODULE:APP")
@click.option("--processors", default=None, metavar="A,B", help="Run only these processors.")
@plugin_option
def worker(target: str, processors: str | None, plugins: tuple[str, ...]) -> None:
    """Run a worker for the app MODULE:APP until SIGINT/SIGTERM.

    A first signal stops gracefully (in-flight events finish and are acknowledged);
    a second one stops at once.
    """
    load_plugins(plugins)
    app = load(target, App)
    logs.configure(app.settings.log_level, app.settings.log_format)
    chosen = [p.strip() for p in processors.split(",") if p.strip()] if processors else None
    try:
        code = asyncio.run(app.run_worker(chosen))
    except RunnelError as exc:
        raise click.ClickException(str(exc)) from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        code = 1
    except Exception as exc:
        logging.getLogger("runnel.worker").exception("worker crashed")
        raise click.ClickException(f"worker crashed: {exc!r}") from None
    sys.exit(code)
