"""``runnel spark export`` and ``runnel spark import``, run as the real command line."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from types import ModuleType

import redis

from tests.spark.test_batch import orders
from tests.support.ports import start_redis
from tests.support.processes import cli, env_with
from tests.support.spark import ROOT, send, stored


def run(tmp_path: Path, redis_url: str, *args: str):
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return cli("spark", *args, cwd=tmp_path, env=env_with(redis_url, PYTHONPATH=pythonpath))


NOTICES = (
    "Using incubator modules",
    "Setting default log level",
    "To adjust logging level",
    "FutureWarning",
    "require_minimum_pandas_version",
)
"""Start-up notices of the JVM, Spark and PySpark that `runnel spark` silences."""


def said(stderr: str) -> list[str]:
    """The lines of stderr but Spark's progress bar (redrawn with \\r, then blanked)."""
    parts = (p.strip() for line in stderr.split("\n") for p in line.split("\r"))
    return [p for p in parts if p and not p.startswith("[Stage ")]


def records_of(client: redis.Redis, stream) -> list:
    return sorted((r for _, _, r in stored(client, stream)), key=lambda r: r.order_id)


def test_export_then_import_parquet(
    streams: ModuleType, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    sent = orders(streams, 300)
    send(streams.orders_json, sent)

    done = run(tmp_path, redis_url, "export", "tests.spark.streams:orders_json", "out.parquet")
    assert done.returncode == 0, done.stderr
    # Nothing but what the command says (and the progress bar): no start-up notices.
    assert said(done.stderr) == [
        "exported 300 events of sparkt.orders.json to out.parquet (parquet)"
    ], done.stderr
    assert not [n for n in NOTICES if n in done.stderr], done.stderr
    assert list((tmp_path / "out.parquet").glob("*.parquet"))

    done = run(tmp_path, redis_url, "import", "out.parquet", "tests.spark.streams:orders_avro_out")
    assert done.returncode == 0, done.stderr
    assert said(done.stderr) == [
        "imported 300 rows from out.parquet into sparkt.orders_out.avro"
    ], done.stderr
    assert not [n for n in NOTICES if n in done.stderr], done.stderr
    assert records_of(redis_client, streams.orders_avro_out) == sent


def test_export_then_import_csv(
    streams: ModuleType, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    sent = orders(streams, 50)
    send(streams.orders_json, sent)
    done = run(tmp_path, redis_url, "export", "tests.spark.streams:orders_json", "o.csv")
    assert done.returncode == 0, done.stderr
    assert "exported 50 events of sparkt.orders.json to o.csv (csv)" in done.stderr
    # Nested values are JSON text and bytes base64 in CSV, and are read back as such.
    done = run(tmp_path, redis_url, "import", "o.csv", "tests.spark.streams:orders_json_out")
    assert done.returncode == 0, done.stderr
    assert records_of(redis_client, streams.orders_json_out) == sent

    # An existing OUT is refused before Spark starts, naming --overwrite, which replaces it.
    done = run(tmp_path, redis_url, "export", "tests.spark.streams:orders_json", "o.csv")
    assert (done.returncode, done.stderr) == (
        1,
        "Error: o.csv exists: give --overwrite to replace it\n",
    )
    done = run(
        tmp_path, redis_url, "export", "tests.spark.streams:orders_json", "o.csv", "--overwrite"
    )
    assert done.returncode == 0, done.stderr
    assert said(done.stderr) == ["exported 50 events of sparkt.orders.json to o.csv (csv)"]


def test_import_of_a_bad_file_sends_nothing(
    streams: ModuleType, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    lines = ['{"key": "a", "n": 1}', '{"key": "b", "n": "two"}', '{"key": "c", "n": 3}']
    (tmp_path / "pings.jsonl").write_text("\n".join(lines) + "\n")
    done = run(tmp_path, redis_url, "import", "pings.jsonl", "tests.spark.streams:pings_out")
    assert done.returncode == 1
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("Error: 1 of 3 rows of pings.jsonl are not valid, nothing was sent")
    assert '(got "two")' in error and '"key": "b"' in error
    assert stored(redis_client, streams.pings_out) == []


def test_unknown_targets_and_files_fail_before_spark_starts(redis_url: str, tmp_path: Path) -> None:
    done = run(tmp_path, redis_url, "export", "tests.spark.streams:orders", "o.csv")
    assert done.returncode == 1
    assert done.stderr.strip() == "Error: tests.spark.streams:orders is dict, not a Stream"
    done = run(tmp_path, redis_url, "export", "tests.spark.streams:nope", "out.parquet")
    assert done.returncode == 1
    assert done.stderr.strip() == "Error: module 'tests.spark.streams' has no attribute 'nope'"
    done = run(tmp_path, redis_url, "import", "missing.json", "tests.spark.streams:pings")
    assert done.returncode == 1
    assert done.stderr.strip() == "Error: cannot read missing.json: no such file or directory"


def test_import_names_the_row_field_and_value_of_bytes_that_are_not_base64(
    streams: ModuleType, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    common = '"customer": "c", "status": "new", "created_at": "2024-01-01T00:00:00Z"'
    lines = [
        f'{{"order_id": 1, {common}, "day": "2024-01-01", "items": [], "blob": "aGk="}}',
        f'{{"order_id": 2, {common}, "day": "2024-01-01", "items": [], "blob": "no base64!"}}',
    ]
    (tmp_path / "orders.jsonl").write_text("\n".join(lines) + "\n")
    done = run(tmp_path, redis_url, "import", "orders.jsonl", "tests.spark.streams:orders_json_out")
    assert done.returncode == 1
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("Error: 1 of 2 rows of orders.jsonl are not valid, nothing was sent")
    assert "row 2 of Spark partition 0" in error
    assert "blob: bytes must be given as base64" in error and '(got "no base64!")' in error
    assert "collectToPython" not in error
    assert stored(redis_client, streams.orders_json_out) == []


def test_refused_credentials_fail_before_spark_starts(tmp_path: Path) -> None:
    """One Error: line, as every command, found out before Spark takes its seconds to
    start (Spark's own lines on stderr would come first)."""
    server = start_redis(tmp_path / "locked", persist=False)
    try:
        admin = redis.Redis(port=server.port)
        admin.config_set("requirepass", "admin-Pw-8e1")
        admin.close()
        url = f"redis://:wrong-Pw-3b7@127.0.0.1:{server.port}/0"
        (tmp_path / "pings.jsonl").write_text('{"key": "a", "n": 1}\n')
        export = run(tmp_path, url, "export", "tests.spark.streams:pings", "out.parquet")
        imported = run(tmp_path, url, "import", "pings.jsonl", "tests.spark.streams:pings_out")
    finally:
        os.kill(server.pid, signal.SIGTERM)
    for done in (export, imported):
        assert done.returncode == 1
        assert done.stderr.strip() == (
            f"Error: redis://:***@127.0.0.1:{server.port}/0: authentication failed for user "
            "'default' (WRONGPASS invalid username-password pair or user is disabled.)"
        )
