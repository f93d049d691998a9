"""Sending an append again when its reply was lost, under the same identity.

A connection that drops after an append was sent leaves the sender unable to tell
whether the store ran it. Without an identity that doubt goes to the caller (sending
again could append twice). With one (:mod:`runnel.store.identity`), the store recognises
what it took already, so the append is simply sent again, a few times with backoff
(``send_retries``): the reply then gives every record's id, the original ones for what
was in, and nothing is appended twice. A failure that is certain to have sent nothing
(:class:`~runnel.exceptions.NotConnected`, a refusal) is the caller's, as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TypeVar

from runnel.exceptions import NotConnected, PartitionFull, PartlySent, Unavailable

T = TypeVar("T")

log = logging.getLogger("runnel.send")

FIRST_PAUSE = 0.1
"""Seconds before the first try again; each next one waits twice as long."""
LONGEST_PAUSE = 2.0

duplicates: Counter[tuple[str, str]] = Counter()
"""Records this process sent that their partitions had already, by (app, stream), from
each append's reply: the metrics' ``runnel_duplicates_dropped_total``. Kept here, not in
:mod:`runnel.metrics.stats`, which the stream cannot import (it imports the processor)."""


async def resending(append: Callable[[bool], Awaitable[T]], retries: int, what: str) -> T:
    """``append(False)``, and ``append(True)`` (a try again) up to ``retries`` times
    while its outcome is in doubt (a lost reply, a part of a cluster's append in doubt).
    Also what sends an enqueue of jobs again (:mod:`runnel.jobs.batching`).
    Out of tries, the last failure is raised; one that says nothing was sent
    (NotConnected) after an earlier doubt raises that doubt instead, since the earlier
    try may have gone in."""
    doubt: Exception | None = None
    pause = FIRST_PAUSE
    for attempt in range(retries + 1):
        try:
            return await append(attempt > 0)
        except PartitionFull:
            raise  # waited for room already (full_timeout); the ids say what is in
        except PartlySent as exc:
            if not (exc.in_doubt and exc.identified):
                raise  # nothing in doubt, or what is may not be sent again
            failure: Exception = exc
        except Unavailable as exc:
            if isinstance(exc, NotConnected) and doubt is None:
                raise  # nothing was sent: nothing is in doubt
            failure = exc
        if not isinstance(failure, NotConnected):
            doubt = failure
        if attempt == retries:
            break
        # Info, not a warning: the outcome is what was asked (a command line prints
        # warnings, and its one error line says it when every try fails).
        log.info(
            "%s: the store's reply was lost (%s); sending it again under its identity, "
            "which stores nothing twice (try %d of %d)",
            what,
            failure,
            attempt + 2,
            retries + 1,
        )
        await asyncio.sleep(pause)
        pause = min(pause * 2, LONGEST_PAUSE)
    assert doubt is not None
    raise doubt if isinstance(failure, NotConnected) else failure
