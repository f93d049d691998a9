"""The garbage collector paused while ``runnel worker`` starts.

Starting a worker imports a few hundred modules and builds the app, its records' models
and its store: hundreds of thousands of objects, nearly all alive until the process
ends. Python's collector runs over a hundred passes over them meanwhile (about a tenth
of the start, measured in docs/performance.md) and frees next to nothing. The worker
command pauses it at its start; the worker resumes it as it begins to run, after
freezing that start-up heap (``frozen_heap``), so that no pass ever walks it.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_paused = False


def pause_collections() -> None:
    """Stop automatic collections until :func:`resume_collections` (if they were on)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume_collections() -> None:
    """Undo :func:`pause_collections`; nothing if it did not pause them."""
    global _paused
    if _paused:
        _paused = False
        gc.enable()


def collections_paused(command: Callable[P, T]) -> Callable[P, T]:
    """Run ``command`` with collections paused, and resumed when it returns if nothing
    resumed them before (a worker that never ran: an error, or ``--processes``)."""

    @functools.wraps(command)
    def paused(*args: P.args, **kwargs: P.kwargs) -> T:
        pause_collections()
        try:
            return command(*args, **kwargs)
        finally:
            resume_collections()

    return paused
