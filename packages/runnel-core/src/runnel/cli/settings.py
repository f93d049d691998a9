"""``runnel settings``: every setting with its environment variable and default, where
``App`` is installed: what a message about an unknown setting points to."""

from __future__ import annotations

import enum
from typing import Any

import click


@click.command()
def settings() -> None:
    """List every setting of App(...): its RUNNEL_* environment variable and its default.

    docs/settings.md says what each one does and its unit.
    """
    from runnel.settings import PREFIX, Settings

    rows = [
        (name, PREFIX + name.upper(), _shown(field.default))
        for name, field in sorted(Settings.model_fields.items())
    ]
    rows.insert(0, ("setting", "variable", "default"))
    first = max(len(r[0]) for r in rows)
    second = max(len(r[1]) for r in rows)
    for name, variable, default in rows:
        click.echo(f"{name:<{first}}  {variable:<{second}}  {default}")


def _shown(value: Any) -> str:
    """A default as it is written: ``halt`` for an enum, ``md5`` for the default hasher."""
    from runnel.hashing import named_hasher

    if isinstance(value, enum.Enum):
        return str(value.value)
    if callable(value):
        return "md5" if value is named_hasher("md5") else getattr(value, "__name__", repr(value))
    return f'"{value}"' if isinstance(value, str) else str(value)
