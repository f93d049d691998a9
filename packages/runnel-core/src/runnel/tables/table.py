"""``app.table(...)``: state kept per partition of a source stream, exactly once; and its
windowed forms, ``.tumbling()``, ``.hopping()``, ``.sliding()`` and ``.session()``.

Inside the processor of its source stream, ``table[key]`` reads and writes the state of
the partition whose event is being handled, synchronously; the changes commit with that
event's acknowledgement (docs/state.md). Anywhere else, ``await table.get(key)`` reads the
committed value, and :meth:`Table.items` iterates a partition's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runnel.exceptions import Misconfigured
from runnel.tables.base import TableBase, check_partition_counts, current
from runnel.tables.windowed import EventTime, WindowClosed, WindowedTable
from runnel.tables.windows import Hopping, Kind, Session, Sliding, Tumbling, merge_values

if TYPE_CHECKING:
    from runnel.stream import Stream

__all__ = ["Table", "check_partition_counts", "current"]

OnClose = Callable[[WindowClosed], Any]


class Table(TableBase):
    """A map per partition of ``source``, keyed by the stream's partition keys."""

    def tumbling(
        self,
        size: float,
        *,
        grace: float = 0,
        expires: float | None = None,
        time: EventTime = None,
        late: Stream | str = "drop",
        on_close: Stream | OnClose | None = None,
    ) -> WindowedTable:
        """Keep values per window of ``size`` seconds of event time, back to back."""
        return self._windowed(Tumbling(size), grace, expires, time, late, on_close)

    def hopping(
        self,
        size: float,
        step: float,
        *,
        grace: float = 0,
        expires: float | None = None,
        time: EventTime = None,
        late: Stream | str = "drop",
        on_close: Stream | OnClose | None = None,
    ) -> WindowedTable:
        """Keep values per window of ``size`` seconds starting every ``step`` seconds."""
        return self._windowed(Hopping(size, step), grace, expires, time, late, on_close)

    def sliding(
        self,
        size: float,
        *,
        merge: Callable[[Any, Any], Any] | None = None,
        grace: float = 0,
        expires: float | None = None,
        time: EventTime = None,
        late: Stream | str = "drop",
        on_close: Stream | OnClose | None = None,
    ) -> WindowedTable:
        """Keep, for each event, the value of the ``size`` seconds up to it."""
        kind = Sliding(size, merge or merge_values)
        return self._windowed(kind, grace, expires, time, late, on_close)

    def session(
        self,
        gap: float,
        *,
        merge: Callable[[Any, Any], Any] | None = None,
        grace: float = 0,
        expires: float | None = None,
        time: EventTime = None,
        late: Stream | str = "drop",
        on_close: Stream | OnClose | None = None,
    ) -> WindowedTable:
        """Keep values per session: a key's events less than ``gap`` seconds apart."""
        kind = Session(gap, merge or merge_values)
        return self._windowed(kind, grace, expires, time, late, on_close)

    def _windowed(
        self,
        kind: Kind,
        grace: float,
        expires: float | None,
        time: EventTime,
        late: Stream | str,
        on_close: Stream | OnClose | None,
    ) -> WindowedTable:
        if self.replaced_by is not None:
            raise Misconfigured(f"table {self.name!r} is windowed already")
        if self.writer is not None:
            raise Misconfigured(f"table {self.name!r} is in use: make it windowed where declared")
        made = WindowedTable(
            self, kind, grace=grace, expires=expires, time=time, late=late, on_close=on_close
        )
        self.replaced_by = made
        if self.registry is not None:
            self.registry[self.name] = made
        tables = getattr(self.source, "tables", None)
        if tables is not None:
            tables[tables.index(self)] = made
        return made
