"""``runnel worker``: one worker process, or ``--processes N`` of them under a supervisor."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading

import click

from runnel import logs
from runnel.app import App
from runnel.cli.common import failure, load, load_plugins, plugin_option
from runnel.exceptions import RunnelError


@click.command()
@click.argument("target", metavar="MODULE:APP")
@click.option("--processors", default=None, metavar="A,B", help="Run only these processors.")
@click.option(
    "--no-processors", is_flag=True, help="Run no processors (jobs and background tasks only)."
)
@click.option(
    "--jobs/--no-jobs",
    default=True,
    show_default=True,
    help="Take jobs from the app's job queue (when it declares any).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Jobs run at once in each process (default: the job_concurrency setting, 8).",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="N",
    help="Run N worker processes under a supervisor that restarts any that dies.",
)
@plugin_option
def worker(
    target: str,
    processors: str | None,
    no_processors: bool,
    jobs: bool,
    concurrency: int | None,
    processes: int,
    plugins: tuple[str, ...],
) -> None:
    """Run a worker for the app MODULE:APP until SIGINT/SIGTERM: its processors, its job
    queue and its background tasks.

    A first signal stops gracefully (in-flight events and jobs finish, within the grace
    period, and are acknowledged); a second one stops at once.
    """
    load_plugins(plugins)
    app = load(target, App)
    logs.configure(app.settings.log_level, app.settings.log_format)
    if no_processors and processors:
        raise click.ClickException("give --processors or --no-processors, not both")
    chosen = [p.strip() for p in processors.split(",") if p.strip()] if processors else None
    if no_processors:
        chosen = []
    if chosen:
        missing = [p for p in chosen if p not in app.processors]
        if missing:
            raise click.ClickException(
                f"unknown processor(s): {', '.join(missing)} "
                f"(app {app.name} has: {', '.join(app.processors) or 'none'})"
            )
    if processes > 1:
        from runnel.processing.supervisor import Supervisor

        command = [sys.executable, "-m", "runnel"]
        for plugin in plugins:
            command += ["--plugin", plugin]
        command += ["worker", target]
        if processors:
            command += ["--processors", processors]
        if no_processors:
            command.append("--no-processors")
        if not jobs:
            command.append("--no-jobs")
        if concurrency is not None:
            command += ["--concurrency", str(concurrency)]
        sys.exit(Supervisor(command, processes).run())
    try:
        code = asyncio.run(app.run_worker(chosen, jobs=jobs, concurrency=concurrency))
    except RunnelError as exc:
        raise click.ClickException(failure(app, exc)) from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        code = 1
    except Exception as exc:
        logging.getLogger("runnel.worker").exception("worker crashed")
        raise click.ClickException(f"worker crashed: {exc!r}") from None
    _exit(code)


def _exit(code: int) -> None:
    """Exit, without waiting for a synchronous job's thread that outlived its job (it
    was cancelled by the stop, or timed out, and went back to the queue): Python would
    otherwise wait for it before exiting, however long it runs."""
    stuck = [t for t in threading.enumerate() if t.name.startswith("runnel-job") and t.is_alive()]
    if stuck:
        logging.getLogger("runnel.worker").warning(
            "%d job threads are still running; exiting without them", len(stuck)
        )
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
