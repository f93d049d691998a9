"""Registers the ``memory://`` transport: built in, through the same hook as any other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runnel.plugins import hookimpl

if TYPE_CHECKING:
    from runnel.plugins.hookspecs import RegisterTransport
    from runnel.settings import Settings
    from runnel.transport import Transport


def _memory(url: str, settings: Settings) -> Transport:
    from runnel.memory.transport import MemoryTransport

    return MemoryTransport.from_url(url)


@hookimpl
def runnel_transports(register: RegisterTransport) -> None:
    register("memory", _memory)
