"""A Spark batch read and write of Runnel streams as the ACL user `runnel acl` describes,
on the session's local Spark (tests/support/spark.py) and redis-server: ACL LOG stays
empty. Skipped without pyspark and pyarrow."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis

from tests.support.acl import create_user, delete_user, denied, with_user
from tests.support.processes import cli, env_with
from tests.support.spark import reader, send, spark, write  # noqa: F401 (spark: a fixture)

ROOT = Path(__file__).parents[2]


@pytest.fixture
def restricted_url(redis_url: str) -> Iterator[str]:
    admin = redis.Redis.from_url(redis_url, decode_responses=True)
    printed = cli("acl", "tests.spark.streams:app", cwd=ROOT, env=env_with(redis_url))
    assert printed.returncode == 0, printed.stderr
    try:
        yield with_user(redis_url, create_user([admin], printed.stdout))
        assert denied([admin]) == []
    finally:
        delete_user([admin])
        admin.close()


@pytest.fixture
def streams(restricted_url: str) -> Iterator[ModuleType]:
    module = importlib.import_module("tests.spark.streams")
    saved = module.app.settings.redis_url
    module.app.settings.redis_url = restricted_url
    yield module
    module.app.settings.redis_url = saved


def test_a_spark_read_and_write_as_the_acl_user(
    spark: Any,  # noqa: F811
    streams: ModuleType,
    restricted_url: str,
) -> None:
    sent = [streams.Click(user=f"u{i % 5}", n=i, ok=bool(i % 2), score=i / 4) for i in range(40)]
    send(streams.clicks, sent)
    df = reader(spark, streams.clicks, restricted_url)
    assert df.count() == 40
    write(df, streams.clicks_out, restricted_url)
    assert reader(spark, streams.clicks_out, restricted_url).count() == 40
