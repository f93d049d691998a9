"""Helpers shared by the CLI commands: loading targets and turning failures into one line."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from runnel.app import App
from runnel.exceptions import RunnelError
from runnel.imports import import_object
from runnel.jobs.function import JobFunction
from runnel.plugins.manager import load_plugin
from runnel.processor import Processor
from runnel.stream import Stream

T = TypeVar("T")

plugin_option = click.option(
    "--plugin",
    "plugins",
    multiple=True,
    metavar="MODULE",
    help="Import MODULE and register it as a Runnel plugin (repeatable).",
)


def load_plugins(plugins: tuple[str, ...]) -> None:
    for name in plugins:
        try:
            load_plugin(name, source="--plugin")
        except RunnelError as exc:
            raise click.ClickException(str(exc)) from None


def load(target: str, kind: type[T]) -> T:
    """Import ``MODULE:NAME`` and check it is an App, Stream, processor or job."""
    try:
        obj = import_object(target)
    except RunnelError as exc:
        raise click.ClickException(str(exc)) from None
    except ValidationError as exc:
        raise click.ClickException(f"importing {target!r} failed: {describe(exc)}") from None
    except Exception as exc:
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise click.ClickException(f"importing {target!r} failed: {message}") from None
    if kind is Processor:
        obj = getattr(obj, "__runnel_processor__", obj)
    if not isinstance(obj, kind):
        names = {App: "an App", Stream: "a Stream", Processor: "a processor", JobFunction: "a job"}
        raise click.ClickException(
            f"{target} is {type(obj).__name__}, not {names.get(kind, kind.__name__)}"
        )
    return obj


def describe(exc: ValidationError) -> str:
    """One line naming each invalid field, what was wrong, and the value given."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "record"
        given = err.get("input")
        shown = json.dumps(given, default=str) if not isinstance(given, dict) else "{...}"
        parts.append(
            f"{loc}: {err['msg'][:1].lower()}{err['msg'][1:]} (got {shown})"
            if err["type"] != "missing"
            else f"{loc}: missing"
        )
    return "; ".join(parts)


def run(coro: Coroutine[Any, Any, T], app: App) -> T:
    """Run a coroutine against the app's transport; connection trouble becomes one line."""

    async def main() -> T:
        try:
            return await coro
        finally:
            await app.aclose()

    try:
        return asyncio.run(main())
    except RunnelError as exc:
        raise click.ClickException(str(exc)) from None
    except (ConnectionError, OSError, TimeoutError) as exc:
        raise click.ClickException(f"cannot reach {app.settings.redis_url}: {exc}") from None
    except Exception as exc:
        if type(exc).__module__.startswith("redis"):
            raise click.ClickException(f"{app.settings.redis_url}: {exc}") from None
        raise
