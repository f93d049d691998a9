"""What a command uses, Runnel's own and a plugin's alike (``runnel_commands`` hook): the
``--plugin`` and ``--yes`` options, asking a yes/no question, loading ``MODULE:NAME``
targets, and running a coroutine against an app's store with every failure turned into
one line."""

from __future__ import annotations

import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import click
import orjson

from runnel.exceptions import AccessDenied, RunnelError, StoreFull, TransportError, Unavailable
from runnel.imports import import_object
from runnel.plugins.manager import load_plugin
from runnel.services import Services
from runnel.urls import redact

if TYPE_CHECKING:
    from pydantic import ValidationError

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

plugin_option = click.option(
    "--plugin",
    "plugins",
    multiple=True,
    metavar="MODULE",
    help="Import MODULE and register it as a Runnel plugin (repeatable).",
)


def yes_option(verb: str | None) -> Callable[[F], F]:
    """``--yes`` for each of the dead-letter commands (list, replay, purge), so that one
    command line works for all three; only purge asks (``verb`` None)."""
    text = "Do not ask for confirmation."
    if verb is not None:
        text = f"Accepted, as by purge; {verb} does not ask."
    return click.option("--yes", is_flag=True, help=text)


def ask(question: str, *, answer_with: str, err: bool = False) -> bool:
    """A yes/no question (``[y/N]``), on a terminal only. Without one to answer it
    (standard input is not a terminal, or ends), one ``Error:`` line naming the option
    that answers it (``answer_with``), rather than a prompt no one sees and ``Aborted!``."""
    if not sys.stdin.isatty():
        raise click.ClickException(
            f'"{question}" needs an answer and standard input is not a terminal: {answer_with}'
        )
    while True:
        click.echo(f"{question} [y/N]: ", nl=False, err=err)
        line = sys.stdin.readline()  # Ctrl-C: click's "Aborted!"
        if not line:  # the end of the input (Ctrl-D)
            click.echo(err=err)
            raise click.ClickException(f'"{question}" got no answer: {answer_with}')
        answer = line.strip().lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("", "n", "no"):
            return False
        click.echo("Error: invalid input", err=err)


def load_plugins(plugins: tuple[str, ...]) -> None:
    for name in plugins:
        try:
            load_plugin(name, source="--plugin")
        except RunnelError as exc:
            raise click.ClickException(str(exc)) from None


def load(target: str, kind: type[T]) -> T:
    """Import ``MODULE:NAME`` and check it is an App, Stream, processor or job."""
    from pydantic import ValidationError  # here: pydantic is slow to import, --help skips it

    try:
        obj = import_object(target)
    except RunnelError as exc:
        raise one_line(str(exc), exc) from None
    except ValidationError as exc:
        if exc.title == "Settings":
            raise one_line(f"invalid setting: {describe_settings(exc)}", exc) from None
        raise one_line(f"importing {target!r} failed: {describe(exc)}", exc) from None
    except Exception as exc:  # the user's module raised while importing
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise one_line(f"importing {target!r} failed{raised_at(exc)}: {message}", exc) from None
    if kind.__name__ == "Processor":  # a decorated function carries its processor
        obj = getattr(obj, "__runnel_processor__", obj)
    if not isinstance(obj, kind):
        names = {
            "App": "an App",
            "Stream": "a Stream",
            "Processor": "a processor",
            "Table": "a table",
            "TableBase": "a table",
        }
        what = names.get(kind.__name__, "a job" if kind.__name__ == "JobFunction" else None)
        raise click.ClickException(f"{target} is {type(obj).__name__}, not {what or kind.__name__}")
    return obj


def one_line(message: str, exc: BaseException) -> click.ClickException:
    """The one-line error for ``exc``; with ``runnel --traceback``, its stack goes first."""
    if show_traceback:
        traceback.print_exception(exc)
    return click.ClickException(message)


show_traceback = False
"""Set by ``runnel --traceback``: print the whole stack of any error before its line."""


def raised_at(exc: BaseException) -> str:
    """`` at FILE, line N``: the last place in the user's project (the current directory)
    that the exception passed through while importing, else its innermost frame."""
    if isinstance(exc, SyntaxError):
        return ""  # its message names the file and line already
    here = os.getcwd() + os.sep
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<") and "importlib" not in f.filename
    ]
    ours = [f for f in frames if f.filename.startswith(here) and "site-packages" not in f.filename]
    chosen = ours or frames
    if not chosen:
        return ""
    frame = chosen[-1]
    name = frame.filename.removeprefix(here)
    return f" at {name}, line {frame.lineno}"


def describe_settings(exc: ValidationError) -> str:
    """Each invalid setting, named by the ``RUNNEL_*`` variable that gave it if one did."""
    parts = []
    for err in exc.errors():
        name = str(err["loc"][0]) if err["loc"] else "settings"
        variable = f"RUNNEL_{name.upper()}"
        given = {k.upper(): v for k, v in os.environ.items()}.get(variable)
        if name == "redis_url" and given is not None:
            given = redact(given)
        where = f"{variable}={given!r}" if given is not None else f"{name}"
        message = err["msg"][:1].lower() + err["msg"][1:]
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


_LONG_INTEGER = re.compile(r"\d{19}")
"""Where a JSON text may hold an integer beyond 64 bits (2**63 has 19 digits)."""
_NOT_JSON_NUMBER = re.compile(r"-?\b(?:NaN|Infinity)\b")


def json_input(text: str | bytes) -> Any:
    """JSON given to a command, read exactly: integers of any size stay integers (orjson
    reads those beyond 64 bits as floats, which would change them); ``NaN``,
    ``Infinity`` and numbers beyond a float's range are refused, as JSON has none.
    ``ValueError`` (``malformed JSON: ...``) if it is not JSON."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raw = text if isinstance(text, str) else text.decode("utf-8", "replace")
        hint = " (JSON has no NaN or Infinity)" if _NOT_JSON_NUMBER.search(raw) else ""
        raise ValueError(f"malformed JSON: {exc}{hint}") from None
    if _LONG_INTEGER.search(text if isinstance(text, str) else text.decode("utf-8", "replace")):
        from pydantic_core import from_json  # reads any integer exactly

        value = from_json(text)
    return value


def finite(value: Any) -> Any:
    """``value`` with each NaN or infinity (which msgpack carries) as its repr (``"nan"``,
    ``"inf"``), for JSON that other programs read: Python writes them as ``NaN`` and
    ``Infinity``, which no strict JSON reader (a browser's, jq) accepts."""
    if isinstance(value, float):
        return value if value - value == 0 else repr(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def shown_plain(value: Any) -> Any:
    """A value JSON cannot hold, as a message shows it: bytes as their text when they are
    printable UTF-8, else as ``0x`` and hex; anything else as ``str``."""
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            return "0x" + raw.hex()
        return text if text.isprintable() else "0x" + raw.hex()
    return str(value)


def describe(exc: ValidationError) -> str:
    """One line naming each invalid field, what was wrong, and the value given."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "record"
        given = err.get("input")
        shown = json.dumps(given, default=shown_plain) if not isinstance(given, dict) else "{...}"
        parts.append(
            f"{loc}: {err['msg'][:1].lower()}{err['msg'][1:]} (got {shown})"
            if err["type"] != "missing"
            else f"{loc}: missing"
        )
    return "; ".join(parts)


def run(coro: Coroutine[Any, Any, T], app: Services) -> T:
    """Run a coroutine against the app's transport; connection trouble becomes one line.

    Refused on a store that lives inside one process (``memory://``): this process
    would see an empty store of its own, not the workers'."""
    import asyncio  # here: plugins import this module with every command, --help too

    try:
        shared = app.store.shared
    except Exception as exc:
        coro.close()
        raise one_line(failure(app, exc), exc) from None
    if not shared:
        coro.close()
        raise click.ClickException(not_shared(app))

    async def main() -> T:
        try:
            return await coro
        finally:
            await app.aclose()

    try:
        return asyncio.run(main())
    except Exception as exc:  # one line for the store's failures; failure() re-raises bugs
        raise one_line(failure(app, exc), exc) from None


def not_shared(app: Services) -> str:
    return (
        f"{redact(app.settings.redis_url)} is a store inside one process: a command run "
        "in a process of its own sees an empty store, not the workers' data "
        "(use a shared store such as redis:// for the CLI)"
    )


def failure(app: Services, exc: Exception) -> str:
    """One line for a failure talking to the store, naming its URL without a password.

    Errors that are not about the store (bugs) are raised again, with their traceback."""
    where = redact(app.settings.redis_url)
    if isinstance(exc, AccessDenied | StoreFull):
        return f"{where}: {exc}"
    if isinstance(exc, Unavailable):
        return f"cannot reach {where}: {_one_line(exc)}"
    if isinstance(exc, TransportError):
        return f"{where}: {_one_line(exc)}"
    if isinstance(exc, RunnelError):
        return str(exc)
    if isinstance(exc, ConnectionError | OSError | TimeoutError):
        return f"cannot reach {where}: {_one_line(exc)}"
    if type(exc).__module__.startswith("redis"):
        return f"{where}: {_one_line(exc)}"
    raise exc


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
