"""Every hook a Runnel plugin can implement.

Hooks that contribute named things receive a ``register`` callback instead of returning
values, so one plugin can contribute several and the registry knows who provided what.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import click

hookspec = pluggy.HookspecMarker("runnel")

Register = Callable[[str, Callable[..., Any]], None]


@hookspec
def runnel_transports(register: Register) -> None:
    """Register transports: ``register(scheme, factory)``.

    ``factory(url, settings)`` returns a :class:`runnel.transport.Transport` for URLs whose
    scheme is ``scheme`` (``redis``, ``rediss``, ``unix``, ...).
    """


@hookspec
def runnel_serializers(register: Register) -> None:
    """Register serializers: ``register(name, factory)``; ``factory(compressor=None)``."""


@hookspec
def runnel_compressors(register: Register) -> None:
    """Register compressors: ``register(name, factory)``; ``factory()``."""


@hookspec
def runnel_commands(cli: click.Group) -> None:
    """Add sub-commands (or groups) to the ``runnel`` command line."""
