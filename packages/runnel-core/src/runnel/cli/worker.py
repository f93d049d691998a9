"""``runnel worker``: one worker process, or ``--processes N`` of them under a supervisor."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING

import click

from runnel import logs
from runnel.commands import failure, load, load_plugins, not_shared, plugin_option
from runnel.exceptions import AccessDenied, RunnelError
from runnel.jobs.queues import choose
from runnel.runtime.heap import collections_paused, resume_collections
from runnel.runtime.supervisor import REFUSED

if TYPE_CHECKING:
    from runnel.app import App


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
    "--queues",
    default=None,
    metavar="A,B | A=W,B=W",
    help="Take jobs from these queues only: in strict priority order (critical,default), or "
    "each with a weight, its share of the jobs started (critical=5,default=1). Default: the "
    "job_queues setting, else every queue the app's jobs declare, with equal weights.",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="N",
    help="Run N worker processes under a supervisor that restarts any that dies "
    "(needs a shared store: not memory://, which lives inside one process).",
)
@click.option(
    "--log-level",
    type=click.Choice(logs.LEVELS, case_sensitive=False),
    default=None,
    help="Log level of the whole process (default: the log_level setting).",
)
@click.option(
    "--log-format",
    type=click.Choice(logs.FORMATS),
    default=None,
    help="console lines or one JSON object per line (default: the log_format setting).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(min=1, max=65535),
    default=None,
    metavar="PORT",
    help="Serve Prometheus metrics on http://HOST:PORT/metrics (default: the metrics_port "
    "setting; none: no metrics).",
)
@click.option(
    "--metrics-host",
    default=None,
    metavar="HOST",
    help="Address the metrics are served on (default: the metrics_host setting, 0.0.0.0).",
)
@click.option(
    "--health-port",
    type=click.IntRange(min=1, max=65535),
    default=None,
    metavar="PORT",
    help="Serve the health probes /healthz and /readyz on http://HOST:PORT (default: the "
    "health_port setting; none: only beside the metrics, on --metrics-port).",
)
@click.option(
    "--health-host",
    default=None,
    metavar="HOST",
    help="Address the health probes are served on (default: the health_host setting, 0.0.0.0).",
)
@plugin_option
@collections_paused  # until the worker runs (runnel.runtime.heap)
def worker(
    target: str,
    processors: str | None,
    no_processors: bool,
    jobs: bool,
    concurrency: int | None,
    queues: str | None,
    processes: int,
    log_level: str | None,
    log_format: str | None,
    metrics_port: int | None,
    metrics_host: str | None,
    health_port: int | None,
    health_host: str | None,
    plugins: tuple[str, ...],
) -> None:
    """Run a worker for the app MODULE:APP until SIGINT/SIGTERM: its processors, its job
    queue and its background tasks.

    A first signal stops gracefully (in-flight events and jobs finish, within the grace
    period, and are acknowledged); a second one stops at once.
    """
    from runnel.app import App  # here: imported with the collector paused

    load_plugins(plugins)
    app = load(target, App)
    logs.configure(
        (log_level or app.settings.log_level).lower(), log_format or app.settings.log_format
    )
    if no_processors and processors:
        raise click.ClickException("give --processors or --no-processors, not both")
    if queues is not None and not jobs:
        raise click.ClickException("give --queues or --no-jobs, not both")
    if queues is not None or app.settings.job_queues is not None:
        _check_queues(app, queues)
    chosen = [p.strip() for p in processors.split(",") if p.strip()] if processors else None
    if no_processors:
        chosen = []
    if chosen:
        missing = [p for p in chosen if p not in app.processors]
        if missing:
            # Named as they are declared: an id (``stream.name``) means nothing to a user.
            names = ", ".join(dict.fromkeys(p.name for p in app.processors.values()))
            raise click.ClickException(
                f"unknown processor(s): {', '.join(missing)} "
                f"(app {app.name} has: {names or 'none'})"
            )
    if metrics_port is not None:
        app.settings.metrics_port = metrics_port
    if metrics_host is not None:
        app.settings.metrics_host = metrics_host
    if health_port is not None:
        app.settings.health_port = health_port
    if health_host is not None:
        app.settings.health_host = health_host
    if processes > 1:
        resume_collections()  # this process supervises; each child pauses its own start
        if not _shared(app):
            raise click.ClickException(f"--processes {processes}: {not_shared(app)}")
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
        if queues is not None:
            command += ["--queues", queues]
        if log_level:
            command += ["--log-level", log_level]
        if log_format:
            command += ["--log-format", log_format]
        sys.exit(_supervise(command, processes, app))
    try:
        code = asyncio.run(
            app.run_worker(chosen, jobs=jobs, concurrency=concurrency, queues=queues)
        )
    except RunnelError as exc:
        if isinstance(exc, AccessDenied):
            raise Refused(failure(app, exc)) from None
        raise click.ClickException(failure(app, exc)) from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        code = 1
    except Exception as exc:  # a bug: logged with its traceback, exit non-zero
        logging.getLogger("runnel.worker").exception("worker crashed")
        raise click.ClickException(f"worker crashed: {exc!r}") from None
    _exit(code)


def _check_queues(app: App, queues: str | None) -> None:
    """A malformed ``--queues`` (or ``job_queues`` setting), or one naming a queue no job
    of the app declares, is one error line before anything starts."""
    app.autodiscover()  # modules it imports may declare more jobs
    try:
        choose(app.jobs.values(), queues or app.settings.job_queues, app.name)
    except ValueError as exc:
        where = "--queues" if queues is not None else "the job_queues setting"
        raise click.ClickException(f"{where}: {exc}") from None


def _shared(app: App) -> bool:
    try:
        return app.store.shared
    except RunnelError as exc:
        raise click.ClickException(failure(app, exc)) from None


class Refused(click.ClickException):
    """The store refused the worker: a distinct exit code, so that no supervisor
    restarts it only to be refused again."""

    exit_code = REFUSED


def _supervise(command: list[str], processes: int, app: App) -> int:
    """Run the children; with metrics or health probes on, this process serves them for
    all of them."""
    from runnel.runtime.supervisor import Supervisor

    settings = app.settings
    port = settings.metrics_port
    if port is None and settings.health_port is None:
        return Supervisor(command, processes).run()
    from runnel.runtime.supervised_health import SupervisedHealth, health_directory

    # The children report into shared directories and never serve themselves.
    own = {"RUNNEL_METRICS_PORT", "RUNNEL_HEALTH_PORT"}
    env = {k: v for k, v in os.environ.items() if k.upper() not in own}
    supervisor = Supervisor(command, processes, env)
    try:
        with contextlib.ExitStack() as serving:
            health = SupervisedHealth(
                supervisor, serving.enter_context(health_directory()), settings.liveness_timeout
            )
            env.update(health.env)
            exited = [health.forget]
            if port is not None:
                from runnel.metrics.server import supervisor_metrics

                metrics = serving.enter_context(
                    supervisor_metrics(port, settings.metrics_host, health)
                )
                env.update(metrics.env)
                exited.append(metrics.child_exited)
            if settings.health_port is not None and settings.health_port != port:
                from runnel.runtime.probes import probes_app, serve

                probes = serve(
                    probes_app(health), settings.health_port, settings.health_host, "health probes"
                )
                serving.callback(probes.close)

            def child_exited(pid: int) -> None:
                for forget in exited:
                    forget(pid)

            supervisor.child_exited = child_exited
            return supervisor.run()
    except RunnelError as exc:
        raise click.ClickException(str(exc)) from None


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
