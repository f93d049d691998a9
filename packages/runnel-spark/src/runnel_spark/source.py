"""The ``runnel`` data source: what Spark calls to read and write a stream, and to read a
table.

Spark runs these methods in Python processes of its own (planning on the driver, reading
and writing on executors), so each one starts from the options: it imports the stream
(or table) they name and resolves its store's URL on the driver, and hands executors a
picklable :class:`~runnel_spark.target.Target` (:class:`~runnel_spark.tables.TableTarget`).
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from runnel.exceptions import Misconfigured
from runnel_spark.reader import RunnelReader, RunnelStreamReader
from runnel_spark.schema import stream_schema
from runnel_spark.tables import TableReader, TableTarget, names_table, table_schema
from runnel_spark.target import Target, lower
from runnel_spark.writer import RunnelStreamWriter, RunnelWriter, check_columns


class RunnelDataSource(DataSource):
    """Runnel streams for ``spark.read``/``readStream`` and ``df.write``/``writeStream``.

    Options: ``stream`` (``MODULE:STREAM``, or a stream name with ``app=MODULE:APP``),
    ``url`` (overrides the app's ``redis_url``), ``chunkSize`` (entries per round trip);
    reads also ``start``/``end`` (inclusive ids), ``splitSize``; streaming reads
    ``startingOffsets`` and ``maxEntriesPerTrigger``; writes ``exactlyOnce`` (default
    true: each row carries an identity) and ``idempotencyKey`` (a column of keys).
    ``table`` (``MODULE:TABLE``, or a table name with ``app``) reads a table instead, with
    ``since``/``until`` for windowed ones: batch reads only. See docs/spark.md.
    """

    @classmethod
    def name(cls) -> str:
        return "runnel"

    def _options(self) -> dict[str, str]:
        return lower(self.options)

    def schema(self) -> StructType:
        options = self._options()
        if names_table(options):
            return table_schema(TableTarget.from_options(options).table())
        target = Target.from_options(options)
        return stream_schema(target.stream())

    def reader(self, schema: StructType) -> DataSourceReader:
        options = self._options()
        if names_table(options):
            table = TableTarget.from_options(options)
            table.prepare()
            return TableReader(table, schema)
        target = Target.from_options(options)
        target.prepare(writing=False)
        return RunnelReader(target, schema, options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = self._options()
        if names_table(options):
            raise Misconfigured(
                "a table cannot be read as a stream: read it with spark.read "
                "(readStream takes option stream)"
            )
        target = Target.from_options(options)
        target.prepare(writing=False)
        return RunnelStreamReader(target, schema, options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        target = self._writing(schema, overwrite)
        return RunnelWriter(target, target.signature[0])

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        target = self._writing(schema, overwrite)
        return RunnelStreamWriter(target, target.signature[0])

    def _writing(self, schema: StructType, overwrite: bool) -> Target:
        options = self._options()
        if options.get("table"):
            raise Misconfigured(
                f"table={options['table']!r}: a table is written only by its processor, which "
                "commits it with the events that changed it; write to a stream (option stream)"
            )
        if overwrite:
            raise Misconfigured(
                "a runnel stream is append-only: write with mode('append') "
                "(or outputMode('append') when streaming)"
            )
        target = Target.from_options(options)
        if target.key_column is not None and not target.exactly_once:
            raise Misconfigured(
                f"option idempotencyKey={target.key_column!r} gives each row a key, which "
                "exactlyOnce=false turns off: give one or the other"
            )
        check_columns(target.stream(), schema, target.key_column)
        target.prepare(writing=True)
        if target.exactly_once and target.log is not None and not target.log.identities:
            raise Misconfigured(
                f"{type(target.log).__name__} cannot recognise rows it already took, which "
                "exactly-once writes need: give option exactlyOnce=false to write at least once"
            )
        return target
