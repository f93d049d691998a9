"""Tables: state per partition of a stream, committed with the acknowledgements of the
events that changed it (docs/state.md)."""

from runnel.tables.table import Table

__all__ = ["Table"]
