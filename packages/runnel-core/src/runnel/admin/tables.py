"""What ``runnel table`` and the dashboard show of an app's tables: their committed state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson

from runnel.admin.declarations import Declarations
from runnel.tables import TableBase, Window, WindowedTable
from runnel.tables.windows import NEVER


async def tables_report(app: Declarations) -> list[dict[str, Any]]:
    """Each table: its source stream and how many keys each partition holds; a windowed
    table also its windows, and per partition its watermark and late events."""
    out = []
    for table in app.tables.values():
        sizes = await table.sizes()
        partitions: list[dict[str, Any]] = [
            {"number": n, "keys": k} for n, k in sorted(sizes.items())
        ]
        found: dict[str, Any] = {
            "name": table.name,
            "stream": table.source.name,
            "keys": sum(sizes.values()),
            "partitions": partitions,
        }
        if isinstance(table, WindowedTable):
            clocks = await table.clocks()
            found["windows"] = {**table.describe(), "expires": table.expires}
            found["late"] = sum(c.late for c in clocks.values())
            for p in partitions:
                clock = clocks[p["number"]]
                p["watermark"] = None if clock.watermark == NEVER else clock.watermark
                p["late"] = clock.late
        out.append(found)
    return out


def plain_windows(held: list[tuple[Window, Any]]) -> list[dict[str, Any]]:
    """A key's windows as JSON takes them."""
    return [{"start": w.start, "end": w.end, "value": v} for w, v in held]


def parse_key(text: str, declared: type | None = None) -> Any:
    """A key given on the command line: JSON when it reads as JSON (``42``, ``"42"``,
    ``["ada", 2024]``), else the text itself (``ada``). For a table whose keys are declared
    as text, always text (``42`` is ``"42"``); as floats, a whole number is a float."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    if declared is str and not isinstance(value, str):
        return text
    if declared is float and type(value) is int:
        return float(value)
    return value


async def table_entry(table: TableBase, key: Any) -> dict[str, Any]:
    """One key's committed value (a windowed table's: its windows), where it lives, and
    whether it is stored at all."""
    if isinstance(table, WindowedTable):
        held = await table.windows(key)
        return {
            "table": table.name,
            "key": key,
            "partition": table.partition_of(key),
            "stored": bool(held),
            "value": plain_windows(held),
        }
    missing = object()
    value = await table.get(key, missing)
    return {
        "table": table.name,
        "key": key,
        "partition": table.partition_of(key),
        "stored": value is not missing,
        "value": table.default if value is missing else value,
    }


async def table_entries(
    table: TableBase, partition: int | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Every committed entry, partition by partition (a windowed table's: each key with
    its windows)."""
    numbers = range(table.source.partition_count) if partition is None else [partition]
    for number in numbers:
        if isinstance(table, WindowedTable):
            async for key, held in table.items(number):
                yield {"partition": number, "key": key, "value": plain_windows(held)}
            continue
        async for key, value in table.items(number):
            yield {"partition": number, "key": key, "value": value}


async def running_writers(app: Declarations, table: TableBase) -> list[str]:
    """The processors of the table's source stream that have live workers (any of them
    may be the one writing it)."""
    running = []
    for processor in app.processors.values():
        if processor.stream is not table.source:
            continue
        coordination = app.store.coordination(app.name, processor.stream.name, processor.name)
        members = await coordination.members()
        if await coordination.alive(list(members)):
            running.append(processor.name)
    return running
