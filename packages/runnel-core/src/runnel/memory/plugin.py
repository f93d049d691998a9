"""Registers the ``memory://`` store: built in, through the same hook as any other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runnel.plugins import hookimpl

if TYPE_CHECKING:
    from runnel.plugins.hookspecs import RegisterTransport
    from runnel.settings import Settings
    from runnel.store.backend import Backend


def _memory(url: str, settings: Settings) -> Backend:
    from runnel.memory.backend import MemoryBackend

    return MemoryBackend.from_url(url)


@hookimpl
def runnel_transports(register: RegisterTransport) -> None:
    register("memory", _memory)
