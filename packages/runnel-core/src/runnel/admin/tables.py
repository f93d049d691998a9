"""What ``runnel table`` and the dashboard show of an app's tables: their committed state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson

from runnel.admin.declarations import Declarations
from runnel.tables import Table


async def tables_report(app: Declarations) -> list[dict[str, Any]]:
    """Each table: its source stream, the processor writing it (known in a worker only),
    and how many keys each partition holds."""
    out = []
    for table in app.tables.values():
        sizes = await table.sizes()
        out.append(
            {
                "name": table.name,
                "stream": table.source.name,
                "keys": sum(sizes.values()),
                "partitions": [{"number": n, "keys": k} for n, k in sorted(sizes.items())],
            }
        )
    return out


def parse_key(text: str) -> Any:
    """A key given on the command line: JSON when it reads as JSON (``42``, ``"42"``,
    ``["ada", 2024]``), else the text itself (``ada``)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


async def table_entry(table: Table, key: Any) -> dict[str, Any]:
    """One key's committed value, where it lives, and whether it is stored at all."""
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
    table: Table, partition: int | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Every committed entry, partition by partition."""
    numbers = range(table.source.partition_count) if partition is None else [partition]
    for number in numbers:
        async for key, value in table.items(number):
            yield {"partition": number, "key": key, "value": value}


async def running_writers(app: Declarations, table: Table) -> list[str]:
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
