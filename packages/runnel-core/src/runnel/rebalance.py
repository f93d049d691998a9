"""Assigning partitions to executors: pure functions, no I/O.

Three properties, in order of importance:

* Even: every member gets ``count // n`` or ``count // n + 1`` partitions.
* Sticky: a partition stays with its current owner whenever evenness allows, so a
  rebalance moves as few partitions as possible and the rest keep processing through it.
* Deterministic: the same inputs give the same answer on every worker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Assignment = dict[str, list[int]]


def assign(count: int, members: Iterable[str], previous: Mapping[str, Iterable[int]]) -> Assignment:
    """Spread partitions ``0..count-1`` over ``members``, keeping ``previous`` where possible.

    Members not in ``members`` (gone) lose everything; partitions nobody keeps go to the
    members with the most room, lowest name first.
    """
    names = sorted(set(members))
    if not names:
        return {}
    base, extra = divmod(count, len(names))
    kept: dict[str, list[int]] = {}
    taken: set[int] = set()
    for name in names:
        mine = sorted(p for p in set(previous.get(name, ())) if 0 <= p < count and p not in taken)
        kept[name] = mine
        taken.update(mine)

    # Who gets one more than the base: those already holding the most, so fewer move.
    by_holding = sorted(names, key=lambda n: (-len(kept[n]), n))
    quota = {name: base + (1 if i < extra else 0) for i, name in enumerate(by_holding)}

    free = sorted(set(range(count)) - taken)
    for name in names:
        surplus = kept[name][quota[name] :]
        kept[name] = kept[name][: quota[name]]
        free.extend(surplus)
    free.sort()
    for name in names:
        need = quota[name] - len(kept[name])
        if need > 0:
            kept[name].extend(free[:need])
            del free[:need]
        kept[name].sort()
    return kept


def moved(before: Mapping[str, Iterable[int]], after: Mapping[str, Iterable[int]]) -> int:
    """How many partitions changed owner (a partition with no owner before counts)."""
    owner = {p: m for m, ps in before.items() for p in ps}
    return sum(1 for m, ps in after.items() for p in ps if owner.get(p) != m)
