"""Checking a whole DataFrame against a stream before anything is written.

A write validates each task's rows before that task sends any, but tasks run
independently: one bad row fails its own task while others may have written theirs.
:func:`check_rows` runs the same validation, routing and encoding over every row first,
so a caller (``runnel spark import`` does) can write all or nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

from runnel_spark.target import Target
from runnel_spark.writer import BadRow, Encoder, plain_rows, task_place


@dataclasses.dataclass
class Checked:
    """How many rows were checked, and what is wrong with the first bad ones (if any)."""

    rows: int
    bad: int
    errors: list[str]

    @property
    def ok(self) -> bool:
        return self.bad == 0


def check_rows(
    df: DataFrame, *, limit: int = 5, base64: Sequence[str] = (), **options: str
) -> Checked:
    """Validate every row of ``df`` as a record of the stream named by ``options``.

    ``options`` are the data source's (``stream=``, ``app=``); no store is needed.
    ``errors`` holds the messages of up to ``limit`` bad rows. Text in the ``base64``
    columns is checked as the base64 of their bytes (how CSV and JSON files hold bytes).
    """
    target = Target.from_options(options)
    target.stream()  # fail here, on the driver, if the stream cannot be imported

    def check(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        encode = Encoder(target.stream(), base64)
        _, _, place = task_place()
        rows = bad = 0
        errors: list[str] = []
        for number, row in enumerate(plain_rows(batches), 1):
            rows += 1
            try:
                encode(row, f"row {number} of {place}")
            except BadRow as exc:
                bad += 1
                if len(errors) < limit:
                    errors.append(str(exc))
        yield pa.RecordBatch.from_pylist([{"rows": rows, "bad": bad, "errors": errors}])

    found: list[Any] = df.mapInArrow(check, "rows long, bad long, errors array<string>").collect()
    errors = [e for r in found for e in r.errors][:limit]
    return Checked(sum(r.rows for r in found), sum(r.bad for r in found), errors)
