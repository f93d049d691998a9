"""``runnel jobs ...``: look into an app's job queue, enqueue or cancel a job, handle dead
letters."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import click

from runnel.admin.dead_letters import NotFound, dead_job_rows, select_dead_jobs
from runnel.admin.declarations import Declarations
from runnel.admin.jobs import (
    describe_job,
    info_report,
    iso,
    percent,
    periodic_state,
    queue_state,
)
from runnel.admin.workflows import describe_workflow, find_workflow
from runnel.app import App
from runnel.commands import (
    ask,
    finite,
    json_input,
    load,
    load_plugins,
    plugin_option,
    run,
    yes_option,
)
from runnel.jobs.function import MAX_COUNTDOWN, MAX_ID_LENGTH, JobFunction, new_job_id
from runnel.jobs.model import (
    ENDED,
    DeadLetter,
    InvalidArguments,
    JobFailed,
    JobStatus,
    ResultsDisabled,
    Timeout,
)
from runnel.jobs.queues import DEFAULT_QUEUE
from runnel.jobs.result import current_progress
from runnel.plugins.instruments import finish, instruments
from runnel.text import plural

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


@click.group()
def jobs() -> None:
    """The app's job queue: counts, one job, dead letters; enqueue or cancel a job."""


# runnel jobs info


@jobs.command()
@click.argument("target", metavar="MODULE:APP")
@json_option
@plugin_option
def info(target: str, as_json: bool, plugins: tuple[str, ...]) -> None:
    """How many jobs are queued, executing, scheduled, dead and cancelled; results kept;
    the job executors (alive or not) and what each runs; the periodic jobs' last and next
    ticks."""
    load_plugins(plugins)
    app = load(target, App)

    async def read() -> tuple[Any, Any, Any]:
        return *await queue_state(app), await periodic_state(app)

    counts, executors, periodic = run(read(), app)
    now = app.clock.now()
    report = info_report(app, counts, executors, periodic)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"app {app.name}   jobs: {', '.join(report['jobs']) or '-'}")
    due = ""
    if counts.next_due is not None:
        due = f"   (next due {_ago(counts.next_due, now)})"
    click.echo(f"  queued     {counts.queued:>8}")
    click.echo(f"  executing  {counts.executing:>8}")
    click.echo(f"  scheduled  {counts.scheduled:>8}{due}")
    click.echo(f"  dead       {counts.dead:>8}")
    click.echo(f"  cancelled  {counts.cancelled:>8}")
    click.echo(f"  results    {counts.results:>8}")
    queues = report["queues"]
    if len(queues) > 1:
        width = max(9, *(len(name) for name in queues))
        columns = ("queued", "executing", "scheduled", "dead")
        click.echo(f"{'queues:':<{width + 2}}" + "".join(f"{c:>11}" for c in columns))
        for name, c in queues.items():
            click.echo(f"  {name:<{width}}" + "".join(f"{c[k]:>11}" for k in columns))
    alive = sum(1 for e in executors if e.alive)
    click.echo(
        f"executors: {alive} alive"
        + (f", {len(executors) - alive} not beating" if len(executors) > alive else "")
    )
    for e in executors:
        i = e.info
        state = "alive" if e.alive else "NOT BEATING"
        taking = f"  queues {i['queues']}" if i.get("queues", "default") != "default" else ""
        click.echo(
            f"  {e.id}  {i.get('host', '?')} pid {i.get('pid', '?')}  {state}  "
            f"running {i.get('running', '?')}/{i.get('concurrency', '?')}  "
            f"succeeded {i.get('done', '?')}  failed tries {i.get('failed', '?')}{taking}"
        )
    if periodic:
        click.echo("periodic jobs:")
    for p in periodic:
        queue = "" if p.queue == DEFAULT_QUEUE else f", queue {p.queue}"
        click.echo(
            f"  {p.name}  cron {p.cron.spec!r} in {p.cron.zone_name}, missed: {p.cron.missed}"
            + queue
        )
        if p.last is None:
            click.echo("    last tick  none yet")
        else:
            status = p.status
            if status == "UNKNOWN":  # say why: the tick was not run, or long ago
                status += " (not enqueued, or its record expired)"
            click.echo(f"    last tick  {iso(p.last)}  job {p.job}: {status}")
        if p.next is not None:
            click.echo(f"    next tick  {iso(p.next)}  ({_ago(p.next, now)})")


# runnel jobs show


@jobs.command()
@click.argument("target", metavar="MODULE:APP")
@click.argument("job_id", metavar="JOB_ID")
@json_option
@plugin_option
def show(target: str, job_id: str, as_json: bool, plugins: tuple[str, ...]) -> None:
    """Everything kept of one job: status, tries, times, progress, arguments, error,
    result. Given a workflow's id: its status and every job of it."""
    load_plugins(plugins)
    app = load(target, App)
    record = run(app.job_store.job(job_id), app)
    if record is None:
        flow = run(find_workflow(app, job_id), app)
        if flow is None:
            raise click.ClickException(f"no job or workflow with id {job_id!r} in app {app.name}")
        show_workflow(run(describe_workflow(app, flow), app), as_json)
        return
    report = describe_job(record)
    if as_json:
        click.echo(json.dumps(finite(report), indent=2, default=str))
        return
    for key in ("id", "name", "status"):
        click.echo(f"{key + ':':<10} {report[key]}")
    if record.workflow:
        click.echo(f"{'workflow:':<10} {record.workflow}")
    if record.queue != DEFAULT_QUEUE:
        click.echo(f"{'queue:':<10} {record.queue}")
    click.echo(f"{'tries:':<10} {record.tries} of {record.retries + 1}")
    for key in ("created", "due", "started", "finished"):
        if report[key]:
            click.echo(f"{key + ':':<10} {report[key]}")
    if report["waiting"]:
        click.echo(f"{'waiting:':<10} {_waiting(app, record.name, report['waiting'])}")
    if record.executor:
        click.echo(f"{'executor:':<10} {record.executor}")
    progress = current_progress(record)
    if progress is not None:
        said = f" {progress.message}" if progress.message else ""
        click.echo(f"{'progress:':<10} {percent(progress.fraction)}{said}")
    click.echo(f"{'args:':<10} {_json_text(report['args'])}")
    if report["kwargs"]:
        click.echo(f"{'kwargs:':<10} {_json_text(report['kwargs'])}")
    if record.error is not None:
        click.echo(f"{'error:':<10} {record.error.one_line()}")
        if record.error.traceback:
            click.echo(record.error.traceback.rstrip())
    if "result" in report:
        click.echo(f"{'result:':<10} {_json_text(report['result'])}")


def _waiting(app: App, name: str, limit: str) -> str:
    """The limit that put a job's last start off, with its value if the app declares it."""
    job = app.jobs.get(name)
    limits = job.limits if job is not None else None
    value: object = None
    if limits is not None:
        value = limits.rate.text if limit == "rate" and limits.rate else limits.concurrency
    said = f"{limit}_limit" + (f" {value}" if value is not None else "")
    return f"put off by its {said}; starts again when due"


def show_workflow(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(finite(report), indent=2, default=str))
        return
    for key in ("workflow", "shape", "status", "created", "finished"):
        if report[key]:
            click.echo(f"{key + ':':<10} {report[key]}")
    failed = report["failed"]
    if failed is not None:
        click.echo(f"{'failed:':<10} {failed['name']} {failed['id']}: {failed['error']}")
    if "result" in report:
        click.echo(f"{'result:':<10} {_json_text(report['result'])}")
    members = report["members"]
    click.echo(f"{'jobs:':<10} {len(members)}")
    width = max(len(m["name"]) for m in members)
    for m in members:
        handler = "  (on_error)" if m["on_error"] else ""
        click.echo(f"  {m['id']}  {m['name']:<{width}}  {m['status']}{handler}")


# runnel jobs cancel


@jobs.command()
@click.argument("target", metavar="MODULE:APP")
@click.argument("job_id", metavar="JOB_ID")
@plugin_option
def cancel(target: str, job_id: str, plugins: tuple[str, ...]) -> None:
    """Cancel a job that has not ended: queued or scheduled, it never runs; running, it is
    stopped where it runs. Its status becomes CANCELLED. A job that has ended already
    (SUCCESS, DEAD, CANCELLED) is left as it is, and the command fails."""
    load_plugins(plugins)
    app = load(target, App)
    before = run(app.job_store.cancel(job_id, app.clock.now(), app.settings.results_ttl), app)
    if before is JobStatus.UNKNOWN:
        raise click.ClickException(f"no job with id {job_id!r} in app {app.name}")
    if before in ENDED:
        raise click.ClickException(f"job {job_id!r} has already ended ({before}): not cancelled")
    click.echo(f"cancelled job {job_id} (it was {before})")


# runnel jobs send


@jobs.command()
@click.argument("target", metavar="MODULE:JOB")
@click.argument("args_json", metavar="ARGS_JSON", default="[]")
@click.argument("kwargs_json", metavar="[KWARGS_JSON]", default="{}")
@click.option(
    "--countdown",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Run it this many seconds from now.",
)
@click.option(
    "--job-id", default=None, help="Name the job (an id that exists is not enqueued again)."
)
@click.option(
    "--wait",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Wait this long for the result and print it as JSON.",
)
@plugin_option
def send(
    target: str,
    args_json: str,
    kwargs_json: str,
    countdown: float | None,
    job_id: str | None,
    wait: float | None,
    plugins: tuple[str, ...],
) -> None:
    """Enqueue a call of the job MODULE:JOB with arguments given as a JSON array (and
    keyword arguments as a JSON object); print its id.

    The arguments are checked against the job's signature first: on a mistake nothing
    is enqueued.
    """
    load_plugins(plugins)
    job = _load_job(target)
    args = _parse(args_json, "ARGS_JSON", list, "a JSON array")
    kwargs = _parse(kwargs_json, "KWARGS_JSON", dict, "a JSON object")
    if job_id is not None and not 1 <= len(job_id) <= MAX_ID_LENGTH:
        raise click.ClickException(f"--job-id must be 1 to {MAX_ID_LENGTH} characters")
    for name, value, most in (("--countdown", countdown, MAX_COUNTDOWN), ("--wait", wait, None)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise click.ClickException(f"{name} must be a number of seconds >= 0, not {value}")
        if value is not None and most is not None and value > most:
            raise click.ClickException(f"{name} must be at most {most:.0f} seconds (100 years)")
    enqueuing = instruments().enqueuing
    headers: dict[str, str] = {}
    done: list[Any] = []
    if enqueuing is not None:  # a plugin (tracing) is told, and may add headers
        job_id = job_id or new_job_id()
        done = enqueuing(job=job, job_id=job_id, headers=headers)
    try:
        new = job.prepare(args, kwargs, countdown=countdown, job_id=job_id, headers=headers)
    except (InvalidArguments, ValueError) as exc:
        finish(done, None, exc)
        raise click.ClickException(str(exc)) from None
    app = job.app

    def enqueued(added: bool | None, error: BaseException | None) -> None:
        """The plugins' end of the enqueue (once, before any --wait)."""
        if done:
            finish(done, added, error)
            done.clear()

    async def enqueue() -> tuple[bool, Any]:
        try:
            added = await app.enqueuer.submit(new)
        except BaseException as exc:
            enqueued(None, exc)
            raise
        enqueued(added, None)
        if wait is None:
            return added, None
        click.echo(new.id)
        try:
            return added, await job.result(new.id).get(timeout=wait)
        except JobFailed as exc:
            raise click.ClickException(f"job {new.id!r} failed: {exc}") from None
        except (Timeout, ResultsDisabled) as exc:
            raise click.ClickException(str(exc)) from None

    try:
        added, value = run(enqueue(), app)
    except BaseException as exc:
        enqueued(None, exc)  # failed before the enqueue was tried (the store, say)
        raise
    if wait is None:
        click.echo(new.id)
    if not added:
        click.echo(f"a job with id {new.id!r} exists already: not enqueued again", err=True)
    if wait is not None:
        click.echo(_json_text(value))


_JSON_NAMES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def _load_job(target: str) -> JobFunction[Any, Any]:
    """``MODULE:NAME``: the job function that is the module's attribute NAME, or else the
    job an app of the module declares under that name (``@app.job(name=...)``)."""
    try:
        return load(target, JobFunction)
    except click.ClickException:
        module = sys.modules.get(target.partition(":")[0])
        name = target.partition(":")[2]
        for value in vars(module).values() if module is not None else ():
            if isinstance(value, App) and name in value.jobs:
                return value.jobs[name]
        raise


def _parse(text: str, what: str, kind: type, named: str) -> Any:
    try:
        value = json_input(text)
    except ValueError as exc:
        raise click.ClickException(f"{what}: {exc}") from None
    if not isinstance(value, kind):
        raise click.ClickException(
            f"{what} must be {named}, not {_JSON_NAMES.get(type(value), 'a value')}: "
            f"{_excerpt(text)}"
        )
    return value


# runnel jobs dead ...


@jobs.group()
def dead() -> None:
    """Jobs that failed every try: list them, replay them, or purge them."""


def _filters(fn: Any) -> Any:
    fn = click.option(
        "--job", "job_name", default=None, metavar="NAME", help="Only jobs of this name."
    )(fn)
    fn = click.option(
        "--id", "job_ids", multiple=True, metavar="ID", help="Only this job (repeatable)."
    )(fn)
    return fn


async def _chosen(
    app: Declarations, job_name: str | None, job_ids: tuple[str, ...]
) -> list[DeadLetter]:
    """The dead jobs chosen; one that is not there is the command's error."""
    try:
        return await select_dead_jobs(app, job_name, job_ids)
    except NotFound as exc:
        raise click.ClickException(str(exc)) from None


@dead.command("list")
@click.argument("target", metavar="MODULE:APP")
@_filters
@json_option
@yes_option("list")
@plugin_option
def dead_list(
    target: str,
    job_name: str | None,
    job_ids: tuple[str, ...],
    as_json: bool,
    yes: bool,
    plugins: tuple[str, ...],
) -> None:
    """The dead jobs, oldest first: when each died, its id, name and last error."""
    load_plugins(plugins)
    app = load(target, App)
    letters = run(_chosen(app, job_name, job_ids), app)
    if as_json:
        click.echo(json.dumps(dead_job_rows(letters), indent=2))
        return
    if not letters:
        click.echo("no dead jobs")
        return
    for d in letters:
        click.echo(f"{iso(d.at)}  {d.id}  {d.name}  {d.error}")


@dead.command()
@click.argument("target", metavar="MODULE:APP")
@_filters
@yes_option("replay")
@plugin_option
def replay(
    target: str,
    job_name: str | None,
    job_ids: tuple[str, ...],
    yes: bool,
    plugins: tuple[str, ...],
) -> None:
    """Enqueue the dead jobs again, tries reset (all of them, or those chosen)."""
    load_plugins(plugins)
    app = load(target, App)

    async def go() -> int:
        letters = await _chosen(app, job_name, job_ids)
        return await app.job_store.replay(letters, app.clock.now())

    click.echo(f"replayed {plural(run(go(), app), 'dead job')}")


@dead.command()
@click.argument("target", metavar="MODULE:APP")
@_filters
@yes_option(None)
@plugin_option
def purge(
    target: str,
    job_name: str | None,
    job_ids: tuple[str, ...],
    yes: bool,
    plugins: tuple[str, ...],
) -> None:
    """Delete the dead jobs for good (all of them, or those chosen); asks first."""
    load_plugins(plugins)
    app = load(target, App)
    letters = run(_chosen(app, job_name, job_ids), app)
    if not letters:
        click.echo("no dead jobs")
        return
    question = f"Purge {plural(len(letters), 'dead job')} of app {app.name}?"
    if not yes and not ask(question, answer_with="give --yes to purge without being asked"):
        raise click.Abort()
    click.echo(f"purged {plural(run(app.job_store.purge(letters), app), 'dead job')}")


def _excerpt(text: str) -> str:
    """The start of a user's input, on one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= 40 else flat[:37] + "..."


def _ago(when: float, now: float) -> str:
    delta = when - now
    return f"in {delta:.1f}s" if delta >= 0 else f"{-delta:.1f}s ago"


def _json_text(value: Any) -> str:
    """A decoded value as compact JSON text, as it is: integers of any size, and a NaN or
    an infinity (which msgpack carries) as ``NaN``/``Infinity``, not as null."""
    return json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))
