"""Named job queues, and which of them a worker takes from first (docs/jobs.md, "Queues and
priorities").

A job goes to the queue its declaration names (``@app.job(queue="emails")``), else to
:data:`DEFAULT_QUEUE`, which always exists: it is the queue of every job enqueued before
queues existed. A worker takes from a :class:`QueueSelection`: in strict priority order
(``critical,default,bulk``: a later queue only when every earlier one has nothing ready)
or weighted (``critical=5,default=3,bulk=1``: of the jobs it starts while every queue has
some ready, 5 in 9 are critical, 3 default, 1 bulk; a queue with none ready leaves its
share to the others). A :class:`Picker` turns the selection into what each take asks the
store for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

DEFAULT_QUEUE = "default"
"""The queue of jobs declared without ``queue=``, and of every job stored before queues."""
MAX_NAME = 100
MAX_WEIGHT = 1000
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*\Z")

TakePlan = Sequence[tuple[str, int]]
"""What one take asks the store for: queues in the order to try them, each with how many
to take from it first (see :meth:`runnel.store.jobs.JobStore.take`)."""


class Taken(Protocol):
    """A delivery, as far as the picker cares (:class:`runnel.jobs.model.Delivery`)."""

    @property
    def queue(self) -> str: ...


def check_queue_name(name: object) -> str:
    """The name, if it can name a queue (it becomes part of Redis keys); else ValueError."""
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > MAX_NAME:
        raise ValueError(
            f"a queue name is 1 to {MAX_NAME} letters, digits, '_' or '-' (not first), not {name!r}"
        )
    return name


def declared_queues(jobs: Iterable[Any]) -> list[str]:
    """The queues an app's jobs declare, in the order they are first declared, with the
    default queue (which always exists) last if no job names it."""
    names = list(dict.fromkeys(getattr(job, "queue", DEFAULT_QUEUE) for job in jobs))
    if DEFAULT_QUEUE not in names:
        names.append(DEFAULT_QUEUE)
    return names


@dataclass(frozen=True)
class QueueSelection:
    """The queues a worker takes jobs from, in order, and how it shares its slots."""

    names: tuple[str, ...]
    weights: tuple[int, ...] | None = None
    """``None``: strict priority, in the order of ``names``; else one weight per name."""

    @classmethod
    def parse(cls, text: str) -> QueueSelection:
        """``a,b,c`` (strict priority) or ``a=5,b=3,c=1`` (weighted); ValueError if not."""
        parts = [p.strip() for p in str(text).split(",")]
        if not text.strip() or any(not p for p in parts):
            raise ValueError(
                f"queues are names separated by commas (critical,default) or names with "
                f"weights (critical=5,default=1), not {text!r}"
            )
        weighted = ["=" in p for p in parts]
        if any(weighted) and not all(weighted):
            raise ValueError(f"give every queue a weight or none, not {text!r}")
        names: list[str] = []
        weights: list[int] = []
        for part in parts:
            name, _, weight = part.partition("=")
            name = check_queue_name(name.strip())
            if name in names:
                raise ValueError(f"queue {name!r} is given twice in {text!r}")
            names.append(name)
            if all(weighted):
                weights.append(_weight(name, weight.strip()))
        return cls(tuple(names), tuple(weights) if weights else None)

    @classmethod
    def every(cls, names: Sequence[str]) -> QueueSelection:
        """Every queue with the same weight: what a worker takes without ``--queues``."""
        if list(names) == [DEFAULT_QUEUE]:
            return cls((DEFAULT_QUEUE,))
        return cls(tuple(names), tuple(1 for _ in names))

    def check(self, known: Iterable[str], app: str) -> None:
        """ValueError naming the queues no job of the app declares (the default queue
        always exists)."""
        have = set(known) | {DEFAULT_QUEUE}
        unknown = [n for n in self.names if n not in have]
        if unknown:
            raise ValueError(
                f"unknown queue(s): {', '.join(unknown)} (app {app} has: {', '.join(sorted(have))})"
            )

    def __str__(self) -> str:
        if self.weights is None:
            return ",".join(self.names)
        return ",".join(f"{n}={w}" for n, w in zip(self.names, self.weights, strict=True))

    def describe(self) -> str:
        """How a log line says it."""
        if self.weights is not None:
            return f"{self} (weighted)"
        return f"{self} (strict priority)" if len(self.names) > 1 else str(self)


def choose(jobs: Iterable[Any], given: str | QueueSelection | None, app: str) -> QueueSelection:
    """The queues a worker of ``app`` takes from: ``given`` (``--queues``, or the
    ``job_queues`` setting), checked against the queues of the app's ``jobs``; without
    it, every queue they declare (and the default one) with equal weights. ValueError
    for a malformed selection or a queue no job declares."""
    known = declared_queues(jobs)
    if given is None:
        return QueueSelection.every(known)
    selection = given if isinstance(given, QueueSelection) else QueueSelection.parse(given)
    selection.check(known, app)
    return selection


def _weight(name: str, text: str) -> int:
    try:
        weight = int(text)
    except ValueError:
        weight = 0
    if not 1 <= weight <= MAX_WEIGHT:
        raise ValueError(
            f"the weight of queue {name!r} must be a whole number from 1 to {MAX_WEIGHT}, "
            f"not {text!r}"
        )
    return weight


class Picker:
    """Decides, take by take, how many jobs to ask of each queue of a selection.

    Strict: every take asks the queues in order, each for all it wants. Weighted: a
    smooth weighted round robin over the slots being filled: each slot goes to the queue
    with the most credit, every queue earns its weight per slot and the chosen one pays
    the total; the take then asks each queue for its slots first, and fills what an
    empty queue left from the others, those owed the most first. Credit is kept within
    one round of the weights, so a queue that was empty for a while neither banks slots
    nor is made to wait for the ones the others filled in for it.
    """

    def __init__(self, selection: QueueSelection) -> None:
        self.selection = selection
        self.names = selection.names
        self.weights = selection.weights
        self.plain = selection.names == (DEFAULT_QUEUE,)
        """Only the default queue: takes are the classic ones (``plan`` is None)."""
        self._total = sum(self.weights) if self.weights else 0
        self._credit = [0] * len(self.names)

    def plan(self, want: int) -> TakePlan | None:
        """What a take of up to ``want`` jobs asks for; None: the default queue alone."""
        if self.plain:
            return None
        if self.weights is None:
            return [(name, want) for name in self.names]
        credit, weights, total = self._credit, self.weights, self._total
        quotas = [0] * len(self.names)
        for _ in range(want):
            best = 0
            for i, weight in enumerate(weights):
                credit[i] += weight
                if credit[i] > credit[best]:
                    best = i
            credit[best] -= total
            quotas[best] += 1
        order = sorted(range(len(self.names)), key=lambda i: (-quotas[i], -credit[i], i))
        return [(self.names[i], quotas[i]) for i in order]

    def taken(self, plan: TakePlan | None, deliveries: Sequence[Taken]) -> None:
        """Settle the credit with what a take of ``plan`` got."""
        if plan is None or self.weights is None:
            return
        got: dict[str, int] = {}
        for d in deliveries:
            got[d.queue] = got.get(d.queue, 0) + 1
        self._settle(dict(plan), got)

    def _settle(self, asked: Mapping[str, int], got: Mapping[str, int]) -> None:
        total = self._total
        for i, name in enumerate(self.names):
            short = asked.get(name, 0) - got.get(name, 0)
            # A queue that gave less than its share gets the credit back; one that gave
            # more (filling in for an empty one) pays for it; within one round either way.
            self._credit[i] = max(-total, min(total, self._credit[i] + short * total))
