"""Tables: state per partition of a stream, committed with the acknowledgements of the
events that changed it, and windowed tables (docs/state.md)."""

from runnel.tables.base import TableBase
from runnel.tables.clock import META
from runnel.tables.table import Table
from runnel.tables.windowed import WindowClosed, WindowedTable, WindowedValue
from runnel.tables.windows import Window

__all__ = [
    "META",
    "Table",
    "TableBase",
    "Window",
    "WindowClosed",
    "WindowedTable",
    "WindowedValue",
]
