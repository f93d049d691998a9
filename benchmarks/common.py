"""What every benchmark shares: the private redis-server, the records, filling a backlog,
knowing when a group has drained it, and the results table."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import redis

import runnel
from runnel import Record
from runnel_redis import keys
from runnel_redis.embedded import start_server

APP = "bench"
PARTITIONS = 16
ROOT = Path(__file__).resolve().parents[1]


class Ping(Record):
    key: str
    n: int


class Stamped(Record):
    """A latency probe: ``sent`` is ``time.time()`` when the producer sent it."""

    key: str
    n: int
    sent: float


def stream_keys(stream: str) -> list[str]:
    """The partition streams of ``APP.stream``, named as Runnel names them."""
    return [keys.partition(APP, stream, n) for n in range(PARTITIONS)]


@contextlib.contextmanager
def server() -> Iterator[str]:
    """A private redis-server (no persistence) for one run; yields its URL."""
    directory = Path(tempfile.mkdtemp(prefix="runnel-bench-"))
    srv = start_server(directory, persist=False)
    try:
        yield srv.url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(srv.pid, signal.SIGTERM)
        shutil.rmtree(directory, ignore_errors=True)


def fill(url: str, stream: str, total: int, chunk: int = 20_000, fresh: bool = True) -> None:
    """Append ``total`` Ping entries to ``APP.stream``'s partitions, spread evenly, in the
    entry format Runnel writes (the JSON record in field ``data``). Pipelined raw XADD:
    about 10 s per million events here. ``fresh``: delete the partitions first (else they
    keep their entries and consumer groups)."""
    client = redis.Redis.from_url(url)
    partitions = stream_keys(stream)
    if fresh:
        client.delete(*partitions)
    for start in range(0, total, chunk):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(start + chunk, total)):
            data = orjson.dumps({"key": f"k{i}", "n": i})
            pipe.execute_command("XADD", partitions[i % PARTITIONS], "*", "data", data)
        pipe.execute()
    client.close()


def fill_keyed(url: str, stream: str, total: int, keys: int, chunk: int = 20_000) -> None:
    """Like :func:`fill`, with ``keys`` distinct keys (``k0`` ... in turn), each in the
    partition Runnel's default hasher routes it to (a table needs its keys there)."""
    from runnel.hashing import default_hasher

    client = redis.Redis.from_url(url)
    partitions = stream_keys(stream)
    client.delete(*partitions)
    where = [default_hasher(f"k{k}") % PARTITIONS for k in range(keys)]
    for start in range(0, total, chunk):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(start + chunk, total)):
            data = orjson.dumps({"key": f"k{i % keys}", "n": i})
            pipe.execute_command("XADD", partitions[where[i % keys]], "*", "data", data)
        pipe.execute()
    client.close()


def drop(url: str, stream: str) -> None:
    client = redis.Redis.from_url(url)
    client.delete(*stream_keys(stream))
    client.close()


def drained(client: redis.Redis, stream: str, group: str) -> bool:
    """Whether ``group`` has read and acknowledged every entry of every partition."""
    partitions = stream_keys(stream)
    pipe = client.pipeline(transaction=False)
    for key in partitions:
        pipe.xinfo_stream(key)
        pipe.xinfo_groups(key)
    try:
        replies = pipe.execute()
    except redis.ResponseError:  # a partition or the group does not exist yet
        return False
    for info, groups in zip(replies[::2], replies[1::2], strict=True):
        mine = [g for g in groups if g["name"] == group.encode()]
        if not mine or mine[0]["pending"]:
            return False
        if mine[0]["last-delivered-id"] != info["last-generated-id"]:
            return False
    return True


def git_state() -> str:
    """The commit measured, and whether the product code differs from it."""
    if ROOT not in Path(runnel.__file__).resolve().parents:
        return f"runnel from {Path(runnel.__file__).parents[3]}"
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "packages"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return "unknown commit"
    return f"{head}{' + uncommitted changes in packages/' if dirty else ''}"


# The results table.


@dataclass
class Row:
    figure: str
    runnel: str
    plain: str
    ratio: str = ""
    target: str = ""
    met: bool | None = None
    spread: str = ""


def rate(value: float) -> str:
    return f"{value / 1000:,.1f}k/s"


def spread(values: list[float]) -> str:
    """How far the worst of several runs fell below the best, in percent."""
    return f"{(max(values) - min(values)) / max(values):.0%}" if len(values) > 1 else "-"


def table(rows: list[Row], baseline: str = "plain redis-py") -> str:
    """The rows, each figure next to its ``baseline`` (what Runnel is compared with)."""
    head = ("figure", "runnel", baseline, "ratio", "target", "met", "spread r/b")
    cells = [
        (
            r.figure,
            r.runnel,
            r.plain,
            r.ratio,
            r.target,
            "" if r.met is None else ("met" if r.met else "NOT MET"),
            r.spread,
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head))]
    lines = []
    for c in [head, *cells]:
        left = c[0].ljust(widths[0])
        lines.append(
            "  ".join([left, *(v.rjust(w) for v, w in zip(c[1:], widths[1:], strict=True))])
        )
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
