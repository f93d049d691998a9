"""Runnel: partitioned, ordered, at-least-once event processing on Redis Streams."""

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

__version__ = "0.2.0.dev0"

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
