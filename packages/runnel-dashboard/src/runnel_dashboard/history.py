"""The long history: one sample of the app per time bucket, kept in the app's store so
that it outlives the dashboard and is shared by every dashboard of the app.

Samples go to a one-partition log of the app's own, stream :data:`STREAM` (on Redis the
stream key ``__strm:{app}.__dashboard.0``; docs/operations.md#dashboard), written through
the store's log role like any partition: an entry's id is its bucket's start
(``{milliseconds}-0``), and a store refuses an id not above the last one
(:class:`~runnel.exceptions.EntryIdError`), so when several dashboards run the first to
write a bucket wins and the others' writes of it are refused. The partition is capped
(``maxlen``) at the number of buckets in the kept span, as any partition is.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from runnel.app import App
from runnel.exceptions import EntryIdError, Misconfigured, PartlySent
from runnel.runtime.retry import reraise_if_cancelled
from runnel.store.backend import Backend, admin_of
from runnel.store.log import PartitionId, trim_slack
from runnel_dashboard.sampler import Sampler, rate
from runnel_dashboard.streams import sink_counts

log = logging.getLogger("runnel.dashboard")

STREAM = "__dashboard"
"""The stream name of the history partition (number 0); an app's own stream must not
have this name (docs/operations.md#dashboard says so)."""
FIELD = b"sample"
POINTS = 720
"""The most samples a chart is sent: a longer span is thinned evenly."""
PAGE = 1000


def partition(app: str) -> PartitionId:
    return PartitionId(app, STREAM, 0)


def capacity(every: float, hours: float) -> int:
    """How many samples the kept span holds: one per bucket of ``every`` seconds."""
    return max(2, math.ceil(hours * 3600 / every))


def bound(every: float, hours: float) -> int:
    """The most entries the history partition ever holds: the cap plus the store's trim
    slack (a store trims back to the cap once past it by that much)."""
    keep = capacity(every, hours)
    return keep + trim_slack(keep)


async def write(
    store: Backend, app: str, bucket_ms: int, sample: dict[str, Any], keep: int
) -> bool:
    """Append ``sample`` as the entry of bucket ``bucket_ms`` unless the bucket, or a
    later one, is in (another dashboard wrote it): True if appended. The partition is
    capped at ``keep`` entries."""
    body = json.dumps(sample, separators=(",", ":")).encode()
    try:
        await store.log.append(
            [(partition(app), {FIELD: body})], maxlen=keep, ids=[f"{bucket_ms}-0"]
        )
    except (EntryIdError, PartlySent):
        return False
    return True


async def read(store: Backend, app: str, since: float) -> list[dict[str, Any]]:
    """The samples of buckets from ``since`` (epoch seconds) on, oldest first, each with
    its bucket's time as ``at``; at most :data:`POINTS`, evenly thinned."""
    admin = admin_of(store)
    found: list[dict[str, Any]] = []
    after: bytes | None = f"{max(0, int(since * 1000) - 1)}-0".encode()
    while True:
        page = await admin.scan(partition(app), after, PAGE)
        for entry_id, fields in page:
            try:
                sample = json.loads(fields.get(FIELD, b"{}"))
            except ValueError:
                continue
            sample["at"] = int(entry_id.split(b"-")[0]) / 1000
            found.append(sample)
        if len(page) < PAGE:
            break
        after = page[-1][0]
    if len(found) > POINTS:
        step = len(found) / POINTS
        found = [found[int(i * step)] for i in range(POINTS - 1)] + [found[-1]]
    return found


@dataclass
class History:
    """Samples the app every ``every`` seconds and writes the sample of each bucket to
    the store once, keeping ``hours`` of them."""

    app: App
    every: float
    hours: float
    sampler: Sampler = field(default_factory=lambda: Sampler(keep=2))
    _failed: int | None = None
    _read_at: float | None = None
    _dead: dict[str, int | None] = field(default_factory=dict)
    _dead_at: float | None = None

    @property
    def keep(self) -> int:
        return capacity(self.every, self.hours)

    async def record(self, snap: dict[str, Any], at: float) -> bool:
        """Write the sample of the bucket ``at`` falls in, unless a dashboard did: True if
        this one wrote it."""
        started = time.time()
        dead = await sink_counts(self.app)
        sample = self.sample(snap, dead, at, (started + time.time()) / 2)
        return await write(self.app.store, self.app.name, self.bucket(at), sample, self.keep)

    def bucket(self, at: float) -> int:
        """The start (epoch milliseconds) of the bucket ``at`` falls in."""
        step = max(1, round(self.every * 1000))  # whole milliseconds: no float drift
        return int(at * 1000) // step * step

    def sample(
        self,
        snap: dict[str, Any],
        dead: dict[str, tuple[int | None, int | None]],
        at: float,
        dead_at: float | None = None,
    ) -> dict[str, Any]:
        """Rates since this dashboard's previous look (None at the first), and the gauges
        of now; rates come from each dashboard's own looks, so they hold whichever
        dashboard writes a bucket. ``dead`` is, per stream with a sink, the letters it
        holds and the letters ever appended to it, read at ``dead_at``."""
        seen = self.sampler.add(snap, at)
        read_at = float(snap.get("read_at", at))
        dead_at = at if dead_at is None else dead_at
        totals = (snap.get("jobs") or {}).get("totals")
        failed = None if totals is None else int(totals["retried"]) + int(totals["dead"])
        failures = None
        if self._read_at is not None:
            failures = rate(self._failed, failed, read_at - self._read_at)
        spent = dead_at - self._dead_at if self._dead_at is not None else 0.0
        new_dead = {name: rate(self._dead.get(name), n, spent) for name, (_, n) in dead.items()}
        self._failed, self._read_at = failed, read_at
        self._dead = {name: count for name, (_, count) in dead.items()}
        self._dead_at = dead_at
        processors = snap["processors"]
        return {
            "interval": seen.interval,
            "read_at": seen.read_at,
            "jobs_per_second": seen.jobs_per_second,
            "job_failures_per_second": failures,
            "processed": seen.processed,
            "backlog": seen.backlog,
            "lag": {p["name"]: sum(x["lag"] or 0 for x in p["partitions"]) for p in processors},
            "quarantined": {
                p["name"]: sum(1 for x in p["partitions"] if x["state"] == "QUARANTINED")
                for p in processors
            },
            "lost": {p["name"]: sum(x["lost"] or 0 for x in p["partitions"]) for p in processors},
            "dead_letters": {name: held for name, (held, _) in dead.items()},
            "dead_letters_per_second": new_dead,
        }

    async def read(self, since: float) -> list[dict[str, Any]]:
        return await read(self.app.store, self.app.name, since)

    async def run(self, take: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        """Sample until cancelled, one look per bucket; a failed look leaves a gap."""
        last: int | None = None
        while True:
            reraise_if_cancelled()
            at = time.time()
            if last is not None and self.bucket(at) <= last:
                # Woken a little before the bucket's end (the sleep's clock is not the
                # wall clock): a second look would move the rates' base on while its
                # sample, of a bucket written already, is refused.
                await asyncio.sleep(self.every - at % self.every)
                continue
            last = self.bucket(at)
            try:
                await self.record(await take(), at)
            except Misconfigured as exc:  # a store without logs to read: no history
                log.warning("no history: %s", exc)
                return
            except Exception as exc:
                reraise_if_cancelled()
                log.debug("recording the history failed: %s", exc)
            await asyncio.sleep(self.every - time.time() % self.every)
