"""``runnel dead list|replay|purge MODULE:STREAM``: a stream's dead letters, chosen,
replayed and purged by :mod:`runnel.admin.dead_letters`; here the options are parsed, the
purge confirmed and the letters printed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from runnel.admin.dead_letters import (
    NotFound,
    Selection,
    StreamDeadLetter,
    check_partition,
    purge_stream_dead_letters,
    replay_stream_dead_letters,
    stream_dead_letters,
)
from runnel.commands import ask, load, load_plugins, plugin_option, run, yes_option
from runnel.stream import Stream
from runnel.text import plural


@click.group()
def dead() -> None:
    """List, replay or purge a stream's dead letters (DeadLetterMiddleware's sink)."""


def _when(value: str | None) -> datetime | None:
    """An ISO 8601 time (UTC unless it says otherwise) or an age such as 30m, 2h, 7d."""
    if value is None:
        return None
    age = re.fullmatch(r"(\d+)([smhd])", value.strip())
    if age:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[age[2]]
        return datetime.now(UTC) - timedelta(**{unit: int(age[1])})
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither a time (2024-05-01T12:00) nor an age (30m, 2h, 7d)"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def filters(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        [
            click.argument("target", metavar="MODULE:STREAM"),
            click.option("--since", help="Only those that failed at or after this time or age."),
            click.option("--until", help="Only those that failed before this time or age."),
            click.option("--partition", "number", type=int, help="Only those from this partition."),
            click.option(
                "--error", "text", help="Only those whose error contains TEXT (any case)."
            ),
            plugin_option,
        ]
    ):
        command = option(command)
    return command


def _select(
    target: str, since: str | None, until: str | None, number: int | None, text: str | None
) -> Selection:
    stream = load(target, Stream)
    try:
        check_partition(stream, number)
    except NotFound as exc:
        raise click.ClickException(str(exc)) from None
    try:
        return Selection(stream, _when(since), _when(until), number, text)
    except click.BadParameter as exc:
        raise click.ClickException(exc.message) from None


def _lines(letters: list[StreamDeadLetter]) -> Iterator[str]:
    for letter in letters:
        where = "?" if letter.partition is None else letter.partition.number
        yield (
            f"{letter.id.decode()}  partition {where}  id {letter.source_id or '-'}  "
            f"{letter.failed_at.isoformat(timespec='seconds')}  {letter.error or '-'}"
        )


@dead.command(name="list")
@filters
@yes_option("list")
def list_(
    target: str,
    since: str | None,
    until: str | None,
    number: int | None,
    text: str | None,
    plugins: tuple[str, ...],
    yes: bool,
) -> None:
    """List the dead letters of MODULE:STREAM: sink id, partition, original id, failure
    time and error."""
    load_plugins(plugins)
    selection = _select(target, since, until, number, text)
    letters = run(stream_dead_letters(selection), selection.stream.app)
    for line in _lines(letters):
        click.echo(line)
    click.echo(plural(len(letters), "dead letter"), err=True)


@dead.command()
@filters
@yes_option("replay")
def replay(
    target: str,
    since: str | None,
    until: str | None,
    number: int | None,
    text: str | None,
    plugins: tuple[str, ...],
    yes: bool,
) -> None:
    """Send the chosen dead letters back to the partitions they failed on, as stored (not
    re-encoded), and remove them from the sink."""
    load_plugins(plugins)
    selection = _select(target, since, until, number, text)
    stream = selection.stream
    count = run(replay_stream_dead_letters(selection), stream.app)
    click.echo(f"replayed {plural(count, 'dead letter')} to {stream.name}")


@dead.command()
@filters
@yes_option(None)
def purge(
    target: str,
    since: str | None,
    until: str | None,
    number: int | None,
    text: str | None,
    plugins: tuple[str, ...],
    yes: bool,
) -> None:
    """Delete the chosen dead letters for good (asks first unless --yes)."""
    load_plugins(plugins)
    selection = _select(target, since, until, number, text)
    stream = selection.stream
    letters = run(stream_dead_letters(selection), stream.app)
    if not letters:
        click.echo("no dead letters to purge")
        return
    question = f"delete {plural(len(letters), 'dead letter')} of {stream.name} for good?"
    if not yes and not ask(
        question, answer_with="give --yes to purge without being asked", err=True
    ):
        raise click.ClickException("nothing purged")
    count = run(purge_stream_dead_letters(selection, letters), stream.app)
    click.echo(f"purged {plural(count, 'dead letter')} of {stream.name}")
