"""How long a failed job waits before its next try: exponential, jittered, capped."""

from __future__ import annotations

import random
from collections.abc import Callable


def retry_delay(
    retry: int, base: float, cap: float, rand: Callable[[], float] = random.random
) -> float:
    """Seconds before the ``retry``-th retry (1 for the first): about ``base * 2**retry``.

    The jitter multiplies by a factor in [0.5, 1.5), so that jobs that failed together
    (a dependency that was down) do not all come back at the same moment; the result
    never exceeds ``cap``.
    """
    if retry < 1:
        raise ValueError("retry counts from 1")
    exponent = min(retry, 64)  # beyond this the cap has long been reached
    return min(cap, min(cap, base * 2.0**exponent) * (0.5 + rand()))
