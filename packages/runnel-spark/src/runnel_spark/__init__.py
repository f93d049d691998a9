"""Runnel streams as a PySpark data source and sink, for batch and streaming queries.

>>> import runnel_spark
>>> runnel_spark.register(spark)
>>> df = spark.read.format("runnel").option("stream", "shop.streams:orders").load()
>>> counts = spark.read.format("runnel").option("table", "shop.streams:counts").load()

See docs/spark.md. Names are imported on first use, so that loading the ``runnel`` plugin
(which every ``runnel`` command does) does not import PySpark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from runnel_spark.checking import Checked, check_rows
    from runnel_spark.schema import record_schema, stream_schema
    from runnel_spark.source import RunnelDataSource
    from runnel_spark.tables import table_schema
    from runnel_spark.writer import BadRow, WriteFailed

_HOMES = {
    "BadRow": "writer",
    "WriteFailed": "writer",
    "Checked": "checking",
    "check_rows": "checking",
    "record_schema": "schema",
    "stream_schema": "schema",
    "RunnelDataSource": "source",
    "table_schema": "tables",
}

__all__ = [
    "BadRow",
    "Checked",
    "RunnelDataSource",
    "WriteFailed",
    "check_rows",
    "record_schema",
    "register",
    "stream_schema",
    "table_schema",
]


def register(spark: SparkSession) -> None:
    """Make ``format("runnel")`` available in ``spark`` (once per session)."""
    from runnel_spark.source import RunnelDataSource

    spark.dataSource.register(RunnelDataSource)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'runnel_spark' has no attribute {name!r}")
    return getattr(importlib.import_module(f"runnel_spark.{home}"), name)
