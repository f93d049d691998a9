"""Memory: the worker's resident set while it drains a backlog 10 times larger, then what
a partition's identity state takes in redis-server (``bench memory identities``: that
alone; see :func:`identities`).

One worker process (per event, empty processor) drains a backlog of EVENTS/10 and then one
of EVENTS (default 100k and 1M); its RSS (/proc/PID/status VmRSS) is sampled every 100 ms
and the peak kept. A worker that buffers a bounded number of events stays flat; the
plain loop is measured the same way for reference.
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis

from benchmarks import harness
from benchmarks.common import APP, PARTITIONS, Ping, Row, drop, fill, rate, stream_keys
from runnel_redis import keys as names

TARGET_GROWTH = 0.10


def size(events: int) -> str:
    return f"{events / 1_000_000:g}M" if events >= 1_000_000 else f"{events // 1000}k"


def run(url: str, events: int | None = None, **_: Any) -> list[Row]:
    large = events or 1_000_000
    sizes = (large // 10, large)
    print(f"memory: peak worker RSS draining {size(sizes[0])} and {size(sizes[1])}", flush=True)
    peaks: dict[str, list[float]] = {"runnel": [], "plain": []}
    for total in sizes:
        stream = f"mem{total}"
        fill(url, stream, total)
        for side in ("runnel", "plain"):
            r = harness.drain(url, stream, side, "memory", 1 if side == "runnel" else 8, total)
            peaks[side].append(r["peak_rss_mb"])
            print(
                f"  {side}, {size(total)} backlog: peak RSS {r['peak_rss_mb']:.1f} MB "
                f"(drained at {rate(r['rate'])})",
                flush=True,
            )
        drop(url, stream)
    rows = [
        Row(
            f"peak worker RSS, {size(total)} backlog",
            f"{peaks['runnel'][i]:.1f} MB",
            f"{peaks['plain'][i]:.1f} MB",
            f"{peaks['runnel'][i] / peaks['plain'][i]:.2f}",
        )
        for i, total in enumerate(sizes)
    ]
    growth = {side: p[1] / p[0] - 1 for side, p in peaks.items()}
    rows.append(
        Row(
            f"RSS growth {size(sizes[0])} -> {size(sizes[1])}",
            f"{growth['runnel']:+.1%}",
            f"{growth['plain']:+.1%}",
            target=f"within {TARGET_GROWTH:.0%}",
            met=abs(growth["runnel"]) <= TARGET_GROWTH,
        )
    )
    return rows + identities(url)


# The identity state of a partition (runnel.store.identity), as Redis holds it.

DAY = 86_400


def identities(url: str, **_: Any) -> list[Row]:
    """What a partition's identity state (its ``__idem`` keys) takes in redis-server at
    the default window (3600 s, 10,000 keys), filled by Runnel's own sends.

    A partition remembers the calls and keys of the last half window to whole window, in
    two generations of up to ``keys / 2`` each: at a rate of R sends a second reaching it,
    up to R x 3600 calls, at most 10,000 (from 2.8 sends/s on). The fill is quicker than
    an hour, so where the window's time would start a generation, the count does:
    ``idempotence_keys`` is set to the calls of the window (3,600 at 1 send/s), whose
    generations then hold 1,800 each, as an hour would leave them. Each partition's keys
    are measured with ``MEMORY USAGE ... SAMPLES 0`` (every element counted), and the
    whole by ``used_memory`` before and after deleting them."""
    print("memory: identity state per partition (16 partitions), at the default window")
    rows = [
        _calls(url, "1 send/s", 3_600),
        _calls(url, ">= 2.8 sends/s (full)", 10_000),
        _producers(url, 1),
        _producers(url, 1_000),
        _keyed(url, 10_000),
    ]
    return rows


def _routes() -> list[str]:
    """A routing key (Ping.key) for each of the 16 partitions, in order."""
    from runnel.hashing import default_hasher

    found: dict[int, str] = {}
    n = 0
    while len(found) < PARTITIONS:
        found.setdefault(default_hasher(f"p{n}") % PARTITIONS, f"p{n}")
        n += 1
    return [found[p] for p in range(PARTITIONS)]


async def _sends(url: str, name: str, calls: int, keys: int, keyed: bool) -> None:
    """``calls`` sends of one Ping to each partition; ``keyed``: ``calls`` x 1000 records,
    each with a key of its own (14 bytes), 1000 per send to each partition in turn."""
    from runnel import App

    app = App(name=APP, redis_url=url)
    stream = app.stream(
        name, record=Ping, partition_by="key", partition_count=PARTITIONS, idempotence_keys=keys
    )
    route = _routes()
    if keyed:
        n = 0
        for p in range(calls):
            batch = [Ping(key=route[p % PARTITIONS], n=n + i) for i in range(1000)]
            await stream.send(*batch, keys=[f"order-{r.n:08d}" for r in batch])
            n += 1000
    else:
        records = [Ping(key=key, n=p) for p, key in enumerate(route)]
        for _ in range(calls):
            await stream.send(*records)
    await app.aclose()


async def _sequenced(url: str, name: str, producers: int) -> None:
    """``producers`` producers (32 hex digits each), each one append of 16 numbered
    records, one to each partition."""
    import secrets

    from runnel import App
    from runnel.store import SequencedIdentity

    app = App(name=APP, redis_url=url)
    stream = app.stream(name, record=Ping, partition_by="key", partition_count=PARTITIONS)
    route = _routes()
    entries = stream.entries([Ping(key=key, n=p) for p, key in enumerate(route)])
    for _ in range(producers):
        identity = SequencedIdentity(secrets.token_hex(16), [1] * PARTITIONS)
        await stream.append(entries, identity=identity)
    await app.aclose()


def _measure(url: str, name: str, items: int) -> tuple[float, float]:
    """The bytes of one partition's ``__idem`` keys (mean of the 16), by MEMORY USAGE and
    by ``used_memory`` before and after deleting them all (what they really held: MEMORY
    USAGE estimates a little under); the partitions too. Every partition must hold
    ``items`` calls, keys or producers, else the fill went wrong."""
    client = redis.Redis.from_url(url)
    try:
        state, held = [], []
        for n in range(PARTITIONS):
            meta = names.identities(APP, name, n)
            remembered = [
                names.identity_keys(APP, name, n, 0),
                names.identity_keys(APP, name, n, 1),
                names.producers(APP, name, n),
            ]
            held.append(sum(client.hlen(key) for key in remembered))
            state += [key for key in (meta, *remembered) if client.exists(key)]
        if set(held) != {items}:
            raise RuntimeError(f"{name}: the partitions hold {sorted(set(held))}, not {items}")
        usage = sum(client.memory_usage(key, samples=0) or 0 for key in state)
        before = client.info("memory")["used_memory"]
        client.delete(*state)
        after = client.info("memory")["used_memory"]
        client.delete(*stream_keys(name))
    finally:
        client.close()
    return usage / PARTITIONS, (before - after) / PARTITIONS


def _row(figure: str, items: int, usage: float, freed: float, what: str) -> Row:
    """The state's size as freed (``used_memory``), the primary figure; MEMORY USAGE's
    estimate beside it in the printed line."""
    line = (
        f"  {figure}: {freed / 1024:,.1f} KiB per partition by used_memory "
        f"({freed / items:,.0f} bytes per {what}), {usage / 1024:,.1f} KiB by MEMORY USAGE "
        f"({usage / items:,.0f} bytes per {what})"
    )
    print(line, flush=True)
    return Row(
        f"identity state per partition, {figure}",
        f"{freed / 1024:,.1f} KiB",
        "",
        f"{freed / items:,.0f} B/{what}",
    )


def _calls(url: str, rate: str, calls: int) -> Row:
    name = f"idem-calls{calls}"
    asyncio.run(_sends(url, name, calls, calls, keyed=False))
    usage, freed = _measure(url, name, calls)
    return _row(f"calls, {rate}: {calls:,}", calls, usage, freed, "call")


def _producers(url: str, producers: int) -> Row:
    name = f"idem-seq{producers}"
    asyncio.run(_sequenced(url, name, producers))
    usage, freed = _measure(url, name, producers)
    what = f"sequenced producer{'s' if producers > 1 else ''}"
    return _row(f"{what}: {producers:,}", producers, usage, freed, "producer")


def _keyed(url: str, keys: int) -> Row:
    name = f"idem-keyed{keys}"
    asyncio.run(_sends(url, name, keys * PARTITIONS // 1000, keys, keyed=True))
    usage, freed = _measure(url, name, keys)
    return _row(f"keys (14 bytes), idempotence_keys={keys:,}: {keys:,}", keys, usage, freed, "key")
