"""Small pieces of the messages Runnel writes."""

from __future__ import annotations

from collections.abc import Iterable


def runs(numbers: Iterable[int]) -> str:
    """Sorted numbers as runs, ``[0, 1, 2, 5, 7, 8, 9]`` as ``"0-2, 5, 7-9"``: what a
    failed send of a thousand records names, kept to one readable line."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 dead letter``, ``2 dead letters``: a count with its noun agreeing, so that no
    message reads "1 dead letters"; ``many`` for nouns not made plural by an ``s``."""
    return f"{count} {word if count == 1 else many or word + 's'}"
