"""runnel 0.1's home of :class:`ExceptionPolicy`, kept so 0.1 imports work.

New code imports it from :mod:`runnel` directly.
"""

from runnel.types import ExceptionPolicy

__all__ = ["ExceptionPolicy"]
