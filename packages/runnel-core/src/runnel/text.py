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


def nearest(name: str, names: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The known name ``name`` most likely meant: the same with or without the settings'
    ``default_`` prefix (``prefetch_count`` for ``default_prefetch_count``, and back), else
    the closest spelling if any is close enough (difflib's ratio >= ``cutoff``)."""
    import difflib  # here: only a mistake needs it

    known = list(names)
    lowered = name.lower()
    for other in (f"default_{lowered}", lowered.removeprefix("default_")):
        if other != lowered and other in known:
            return other
    close = difflib.get_close_matches(lowered, known, n=1, cutoff=cutoff)
    return close[0] if close else None


def did_you_mean(name: str, names: Iterable[str]) -> str:
    """``name`` for a message, with the nearest known name if there is one."""
    found = nearest(name, names)
    return name if found is None else f"{name} (did you mean {found}?)"
