"""runnel 0.1's module for :class:`Events` (``from runnel.events import Events``); new code
imports it from ``runnel``."""

from runnel.processing.events import Events

__all__ = ["Events"]
