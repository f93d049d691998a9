"""Runnel: partitioned, ordered, at-least-once event processing on Redis Streams.

The names below are imported on first use (PEP 562), not with the package: ``runnel
--help`` and every ``runnel`` command import ``runnel`` first, and an app's classes pull
in pydantic, the job queue and the codecs, which a command may never need."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runnel.lazy import lazy_names

__version__ = "0.2.0.dev0"

_WHERE = {
    "App": "runnel.app",
    "Compressor": "runnel.interfaces",
    "Event": "runnel.types",
    "Events": "runnel.processing.events",
    "ExceptionPolicy": "runnel.types",
    "Middleware": "runnel.interfaces",
    "Misconfigured": "runnel.exceptions",
    "Partition": "runnel.types",
    "Record": "runnel.record",
    "RunnelError": "runnel.exceptions",
    "Serializer": "runnel.interfaces",
    "Stream": "runnel.stream",
    "Window": "runnel.tables",
    "WindowClosed": "runnel.tables",
    "Worker": "runnel.worker",
    "chain": "runnel.jobs.workflow",
    "chord": "runnel.jobs.workflow",
    "group": "runnel.jobs.workflow",
}

if TYPE_CHECKING:
    from runnel.app import App
    from runnel.exceptions import Misconfigured, RunnelError
    from runnel.interfaces import Compressor, Middleware, Serializer
    from runnel.jobs.workflow import chain, chord, group
    from runnel.processing.events import Events
    from runnel.record import Record
    from runnel.stream import Stream
    from runnel.tables import Window, WindowClosed
    from runnel.types import Event, ExceptionPolicy, Partition
    from runnel.worker import Worker


__getattr__, __dir__ = lazy_names("runnel", _WHERE, globals())


__all__ = [
    "App",
    "Compressor",
    "Event",
    "Events",
    "ExceptionPolicy",
    "Middleware",
    "Misconfigured",
    "Partition",
    "Record",
    "RunnelError",
    "Serializer",
    "Stream",
    "Window",
    "WindowClosed",
    "Worker",
    "__version__",
    "chain",
    "chord",
    "group",
]
