"""Runnel: partitioned, ordered, at-least-once event processing on Redis Streams."""

from runnel.app import App
from runnel.exceptions import Misconfigured, RunnelError
from runnel.processing.events import Events
from runnel.record import Record
from runnel.stream import Stream
from runnel.types import Event, ExceptionPolicy, Partition

__version__ = "0.2.0.dev0"

__all__ = [
    "App",
    "Event",
    "Events",
    "ExceptionPolicy",
    "Misconfigured",
    "Partition",
    "Record",
    "RunnelError",
    "Stream",
    "__version__",
]
