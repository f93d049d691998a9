"""Every hook a Runnel plugin can implement.

Hooks that contribute named things receive a ``register`` callback instead of returning
values, so one plugin can contribute several and the registry knows who provided what.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    import click

    from runnel.interfaces import Compressor, Serializer
    from runnel.services import Services
    from runnel.settings import Settings
    from runnel.store.backend import Backend

hookspec = pluggy.HookspecMarker("runnel")

#: ``factory(url, settings)``: the store for one URL.
TransportFactory = Callable[[str, "Settings"], "Backend"]
#: ``factory()``: a compressor with its default settings.
CompressorFactory = Callable[[], "Compressor"]


class SerializerFactory(Protocol):
    """``factory(compressor=None)``: a serializer, compressing with ``compressor`` if given."""

    def __call__(self, compressor: Compressor | None = None) -> Serializer: ...


#: The ``register`` callback each registering hook receives.
RegisterTransport = Callable[[str, TransportFactory], None]
RegisterSerializer = Callable[[str, SerializerFactory], None]
RegisterCompressor = Callable[[str, CompressorFactory], None]
#: Any of the above (what the registry actually passes accepts every factory).
Register = Callable[[str, Callable[..., Any]], None]


@hookspec
def runnel_transports(register: RegisterTransport) -> None:
    """Register stores: ``register(scheme, factory)``.

    ``factory(url, settings)`` returns a :class:`runnel.store.Backend` for URLs whose
    scheme is ``scheme`` (``redis``, ``rediss``, ``unix``, ...).
    """


@hookspec
def runnel_serializers(register: RegisterSerializer) -> None:
    """Register serializers: ``register(name, factory)``; ``factory(compressor=None)``."""


@hookspec
def runnel_compressors(register: RegisterCompressor) -> None:
    """Register compressors: ``register(name, factory)``; ``factory()``."""


@hookspec
def runnel_commands(cli: click.Group) -> None:
    """Add sub-commands (or groups) to the ``runnel`` command line."""


@hookspec(firstresult=True)
def runnel_access_rules(app: Services, user: str, password: bool) -> list[str] | None:
    """The commands an operator runs on the app's store to give ``user`` just the access
    the app needs (``runnel acl``), one a line; None if the store is not this plugin's.

    With ``password``, the lines set a placeholder password for the operator to replace
    (never a real one); without, they keep the user's passwords.
    """
