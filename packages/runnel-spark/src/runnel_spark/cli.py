"""``runnel spark export`` and ``runnel spark import``: streams to files and back, via Spark.

PySpark is imported only when one of these commands runs, since every ``runnel`` command
builds its command line with this plugin loaded.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from runnel.commands import load, load_plugins, plugin_option, run
from runnel.exceptions import AccessDenied, Misconfigured

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from runnel.stream import Stream

FORMATS = ("parquet", "json", "csv")
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
JVM_NOTICES = (
    b"WARNING: Using incubator modules:",
    b'Setting default log level to "',
    b"To adjust logging level use sc.setLogLevel(",
)
"""What the JVM prints on start outside Spark's logging, so that the log configuration
cannot silence it: Java's notice of the vector module Spark asks for, and the notice of
the log level of an interactive shell, which a PySpark driver counts as."""
PANDAS_WARNING = "PySpark does not yet fully support pandas"

# The lines of a Python traceback, inside Spark's error text, that say what went wrong:
# Runnel's own exceptions first, then any Python exception.
_RUNNEL_CAUSE = re.compile(
    r"^(?:[\w.]+\.)?(?:BadRow|WriteFailed|DecodeError|Misconfigured|SchemaIncompatible|"
    r"ImportTargetError|UnknownPlugin|RunnelError): (.+)$",
    re.MULTILINE,
)
_PYTHON_CAUSE = re.compile(r"^([A-Z]\w*(?:Error|Exception): .+)$", re.MULTILINE)


def spark_options(f: Any) -> Any:
    f = click.option(
        "--conf",
        "confs",
        multiple=True,
        metavar="KEY=VALUE",
        help="A Spark setting, as spark-submit's --conf (repeatable).",
    )(f)
    f = click.option(
        "--master",
        default="local[*]",
        show_default=True,
        help="Where Spark runs: local[N], spark://HOST:PORT, yarn, ...",
    )(f)
    return plugin_option(f)


@click.group()
def spark() -> None:
    """Copy streams to files and files to streams, through Spark."""


@spark.command()
@click.argument("target", metavar="MODULE:STREAM")
@click.argument("out", metavar="OUT")
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="Default: from OUT's suffix.")
@click.option("--start", default="-", help="First entry id (or ms, or ISO time) to export.")
@click.option("--end", default="+", help="Last entry id (or ms, or ISO time) to export.")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it exists.")
@spark_options
def export(
    target: str,
    out: str,
    fmt: str | None,
    start: str,
    end: str,
    overwrite: bool,
    master: str,
    confs: tuple[str, ...],
    plugins: tuple[str, ...],
) -> None:
    """Write the events of MODULE:STREAM to OUT (a directory of parquet, JSON or CSV files),
    one row per event: the record's fields plus _partition, _id and _timestamp."""
    load_plugins(plugins)
    from runnel.stream import Stream  # here: the plugin adds `spark` to every command line

    stream = load(target, Stream)
    fmt = fmt or _format_of(out)
    if not overwrite and _local_path_exists(out):  # before Spark starts, which takes seconds
        raise click.ClickException(f"{out} exists: give --overwrite to replace it")
    _check_store(stream)
    with session(master, confs) as spark:
        df = (
            spark.read.format("runnel")
            .option("stream", target)
            .option("start", start)
            .option("end", end)
            .load()
        )
        if fmt == "csv":
            df = _flat(df)
        writer = df.write.mode("overwrite" if overwrite else "errorifexists").format(fmt)
        if fmt == "csv":
            writer = writer.option("header", "true")
        _spark_call(lambda: writer.save(out))
        written = _reader(spark, fmt).load(out).count()
    click.echo(f"exported {written} events of {stream.id} to {out} ({fmt})", err=True)


@spark.command("import")
@click.argument("source", metavar="FILE")
@click.argument("target", metavar="MODULE:STREAM")
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="Default: from FILE's suffix.")
@spark_options
def import_(
    source: str,
    target: str,
    fmt: str | None,
    master: str,
    confs: tuple[str, ...],
    plugins: tuple[str, ...],
) -> None:
    """Send the rows of FILE (parquet, JSON lines or CSV with a header; a file or a
    directory of them) to MODULE:STREAM, as producers would.

    Every row is checked first: if any is not a valid record, nothing is sent.
    """
    from runnel_spark.checking import check_rows

    load_plugins(plugins)
    from runnel.stream import Stream  # here: the plugin adds `spark` to every command line

    stream = load(target, Stream)
    if not os.path.exists(source):
        raise click.ClickException(f"cannot read {source}: no such file or directory")
    fmt = fmt or _format_of(source)
    _check_store(stream)
    with session(master, confs) as spark:
        df = _spark_call(lambda: _reader(spark, fmt).load(source))
        texts = _base64_columns(df, stream)
        checked = _spark_call(lambda: check_rows(df, stream=target, base64=texts))
        if not checked.rows:
            raise click.ClickException(f"no rows to send ({source} is empty)")
        if not checked.ok:
            raise click.ClickException(
                f"{checked.bad} of {checked.rows} rows of {source} are not valid, nothing was "
                f"sent; the first: {checked.errors[0]}"
            )
        df = _unbase64(df, texts)
        _spark_call(
            lambda: df.write.format("runnel").mode("append").option("stream", target).save()
        )
    click.echo(f"imported {checked.rows} rows from {source} into {stream.id}", err=True)


def _check_store(stream: Stream) -> None:
    """Before Spark starts, which takes seconds: Redis must answer and take the app's
    credentials, found out first as every other command does, in one line."""

    from runnel.store.backend import admin_of

    async def look() -> None:
        try:
            await admin_of(stream.app.store).lengths([p.id for p in stream.partitions])
        except AccessDenied as exc:
            if exc.command == "AUTH":
                raise
            # Not allowed to count (XLEN): the command may need no more than it is allowed.
        except Misconfigured:  # a store that cannot count
            pass

    run(look(), stream.app)


@contextlib.contextmanager
def session(master: str, confs: tuple[str, ...]) -> Iterator[SparkSession]:
    """A Spark session whose Python workers run this Python and can import from here."""
    settings = {}
    for item in confs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.ClickException(f"--conf {item!r}: expected KEY=VALUE")
        settings[key] = value
    # Workers must run this interpreter and import the module named on the command line.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if os.getcwd() not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *paths])

    # PySpark warns of the pandas it finds, in this process and in its Python workers.
    warnings.filterwarnings("ignore", message=PANDAS_WARNING, category=FutureWarning)
    os.environ["PYTHONWARNINGS"] = ",".join(
        filter(None, [os.environ.get("PYTHONWARNINGS"), f"ignore:{PANDAS_WARNING}:FutureWarning"])
    )

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    from runnel_spark import register

    quiet = LOG_CONFIG.as_uri()
    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName("runnel spark")
        .set("spark.ui.showConsoleProgress", "true")
        .set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={quiet}")
    )
    for key, value in settings.items():
        conf = conf.set(key, value)

    def start() -> SparkSession:
        # The JVM's stderr comes through a filter: its start-up notices are not Spark's
        # logging, so the log configuration cannot silence them.
        gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
        threading.Thread(
            target=_forward, args=(gateway.proc.stderr,), name="spark-stderr", daemon=True
        ).start()
        return SparkSession(SparkContext(conf=conf, gateway=gateway))

    spark = _spark_call(start)
    try:
        register(spark)
        yield spark
    finally:
        spark.stop()


def _forward(source: IO[bytes]) -> None:
    """Copy the JVM's stderr to ours as it comes (Spark's progress bar redraws a line with
    \\r), leaving out the lines that start with one of :data:`JVM_NOTICES`."""
    out = sys.stderr.buffer
    pending = b""
    while chunk := source.read1(65536):  # type: ignore[attr-defined]
        pending += chunk
        *lines, pending = pending.split(b"\n")
        shown = [line + b"\n" for line in lines if not line.startswith(JVM_NOTICES)]
        if not any(n.startswith(pending) or pending.startswith(n) for n in JVM_NOTICES):
            shown.append(pending)  # it cannot be a notice: no need to wait for its end
            pending = b""
        out.write(b"".join(shown))
        out.flush()
    out.write(pending)
    out.flush()


def _local_path_exists(path: str) -> bool:
    """Whether ``path`` names something on this machine's file system (a path without a
    scheme, or ``file:``) that exists; Spark itself checks other file systems."""
    if re.match(r"^[a-zA-Z][\w+.-]*:", path) and not path.startswith("file:"):
        return False
    local = re.sub(r"^file:(//)?", "", path)
    return os.path.lexists(local)


def _format_of(path: str) -> str:
    suffix = Path(path.rstrip("/")).suffix.lower().lstrip(".")
    if suffix in ("jsonl", "ndjson"):
        return "json"
    return suffix if suffix in FORMATS else "parquet"


def _reader(spark: SparkSession, fmt: str) -> Any:
    reader = spark.read.format(fmt)
    return reader.option("header", "true") if fmt == "csv" else reader


def _flat(df: DataFrame) -> DataFrame:
    """CSV holds only flat values: nested columns become JSON text, bytes base64."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StructType

    columns = []
    for field in df.schema.fields:
        column = F.col(field.name)
        if isinstance(field.dataType, StructType | ArrayType | MapType):
            column = F.to_json(column)
        elif isinstance(field.dataType, BinaryType):
            column = F.base64(column)
        columns.append(column.alias(field.name))
    return df.select(*columns)


def _base64_columns(df: DataFrame, stream: Stream) -> list[str]:
    """Bytes fields read as text (from CSV or JSON files, as Spark writes them): base64."""
    from pyspark.sql.types import BinaryType, StringType

    from runnel_spark.schema import record_schema

    return [
        field.name
        for field in record_schema(stream.record).fields
        if isinstance(field.dataType, BinaryType)
        and field.name in df.columns
        and isinstance(df.schema[field.name].dataType, StringType)
    ]


def _unbase64(df: DataFrame, names: list[str]) -> DataFrame:
    """The base64 columns as bytes (once :func:`check_rows` found them all valid)."""
    from pyspark.sql import functions as F

    for name in names:
        df = df.withColumn(name, F.unbase64(F.col(name)))
    return df


def _spark_call(fn: Any) -> Any:
    """Run ``fn``; a Spark failure becomes one line saying what went wrong."""
    try:
        return fn()
    except click.ClickException:
        raise
    except Exception as exc:
        if not (type(exc).__module__.startswith(("pyspark", "py4j"))):
            raise
        click.echo("\r" + " " * 80 + "\r", err=True, nl=False)  # under the progress bar
        raise click.ClickException(_cause(exc)) from None


def _cause(exc: BaseException) -> str:
    text = str(exc)
    for pattern in (_RUNNEL_CAUSE, _PYTHON_CAUSE):
        found = pattern.findall(text)
        if found:
            return found[-1].strip()
    return next((line.strip() for line in text.splitlines() if line.strip()), repr(exc))
