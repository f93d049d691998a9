"""Queue selections as ``--queues`` and ``job_queues`` give them, and how the picker shares
takes out among weighted queues (runnel.jobs.queues): pure logic, no store."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest

from runnel import App
from runnel.exceptions import Misconfigured
from runnel.jobs.queues import DEFAULT_QUEUE, Picker, QueueSelection, choose


@dataclass
class Taken:
    queue: str


def drain(selection: str | Picker, ready: dict[str, int], want: int, takes: int) -> list[str]:
    """Run ``takes`` takes of ``want`` through a picker against queues holding ``ready``
    jobs, applying each plan as a store does (quotas first, then the rest in order)."""
    picker = selection if isinstance(selection, Picker) else Picker(QueueSelection.parse(selection))
    started: list[str] = []
    for _ in range(takes):
        plan = picker.plan(want)
        assert plan is not None
        got: list[str] = []
        for pass_ in (0, 1):
            for name, quota in plan:
                n = min(want - len(got), ready[name], quota if pass_ == 0 else want)
                ready[name] -= n
                got += [name] * n
        picker.taken(plan, [Taken(q) for q in got])
        started += got
    return started


def test_parse_strict_and_weighted() -> None:
    strict = QueueSelection.parse(" critical, default ,bulk")
    assert (strict.names, strict.weights) == (("critical", "default", "bulk"), None)
    assert (str(strict), strict.describe()) == (
        "critical,default,bulk",
        "critical,default,bulk (strict priority)",
    )
    weighted = QueueSelection.parse("critical=5, default = 3,bulk=1")
    assert (weighted.names, weighted.weights) == (("critical", "default", "bulk"), (5, 3, 1))
    assert weighted.describe() == "critical=5,default=3,bulk=1 (weighted)"
    assert QueueSelection.parse("emails").describe() == "emails"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "queues are names separated by commas"),
        ("a,", "queues are names separated by commas"),
        ("a=1,b", "give every queue a weight or none"),
        ("a=0", "the weight of queue 'a' must be a whole number from 1 to 1000, not '0'"),
        ("a=1001", "the weight of queue 'a' must be a whole number from 1 to 1000"),
        ("a=1.5", "the weight of queue 'a' must be a whole number"),
        ("a,a", "queue 'a' is given twice"),
        ("-a", "a queue name is 1 to 100 letters"),
        ("a.b", "a queue name is 1 to 100 letters"),
        ("x" * 101, "a queue name is 1 to 100 letters"),
    ],
)
def test_parse_refuses_with_a_clear_message(text: str, error: str) -> None:
    with pytest.raises(ValueError, match="^" + error.replace("(", r"\(")):
        QueueSelection.parse(text)


def test_the_queues_a_worker_takes_by_default() -> None:
    app = App(name="shop", redis_url="memory://")

    @app.job(queue="emails")
    async def send() -> None: ...

    @app.job
    async def resize() -> None: ...

    @app.job(queue="bulk")
    async def report() -> None: ...

    assert app.job_queues == ["emails", DEFAULT_QUEUE, "bulk"]
    chosen = choose(app.jobs.values(), None, app.name)
    assert (chosen.names, chosen.weights) == (("emails", "default", "bulk"), (1, 1, 1))
    assert choose(app.jobs.values(), "bulk,default", app.name).names == ("bulk", "default")
    with pytest.raises(ValueError, match=r"unknown queue\(s\): nope \(app shop has: bulk, "):
        choose(app.jobs.values(), "bulk,nope", app.name)
    plain = App(name="plain", redis_url="memory://")

    @plain.job
    async def only() -> None: ...

    assert Picker(choose(plain.jobs.values(), None, "plain")).plan(5) is None
    # The default queue always exists, even when no job names it.
    assert choose([], "default", "empty").names == (DEFAULT_QUEUE,)


def test_a_job_queue_name_is_checked_at_declaration() -> None:
    app = App(name="shop", redis_url="memory://")
    with pytest.raises(Misconfigured, match="job queue: a queue name is 1 to 100"):

        @app.job(queue="no spaces")
        async def send() -> None: ...


def test_strict_plans_ask_every_queue_for_everything_in_order() -> None:
    picker = Picker(QueueSelection.parse("critical,default,bulk"))
    assert picker.plan(4) == [("critical", 4), ("default", 4), ("bulk", 4)]
    assert drain("critical,default", {"critical": 3, "default": 5}, 2, 4) == [
        "critical",
        "critical",
        "critical",
        "default",
        "default",
        "default",
        "default",
        "default",
    ]


def test_weighted_takes_follow_the_weights_one_slot_at_a_time() -> None:
    started = drain(
        "critical=5,default=3,bulk=1", {"critical": 99, "default": 99, "bulk": 99}, 1, 90
    )
    assert Counter(started) == {"critical": 50, "default": 30, "bulk": 10}
    # Spread out, not in runs: every 9 jobs hold each queue's share.
    for n in range(0, 90, 9):
        assert Counter(started[n : n + 9]) == {"critical": 5, "default": 3, "bulk": 1}


def test_weighted_takes_of_many_slots_hold_the_shares() -> None:
    started = drain("a=2,b=1", {"a": 999, "b": 999}, 25, 12)
    assert Counter(started) == {"a": 200, "b": 100}


def test_an_empty_queue_leaves_its_share_and_banks_nothing() -> None:
    picker = Picker(QueueSelection.parse("critical=5,default=3,bulk=1"))
    ready = {"critical": 0, "default": 999, "bulk": 999}
    started = Counter(drain(picker, ready, 1, 40))
    assert set(started) == {"default", "bulk"}
    assert 27 <= started["default"] <= 32  # about 3:1 between the others
    # Jobs come back to the critical queue: it gets its share again at once, not a
    # burst that makes up for the slots it could not use.
    ready["critical"] = 999
    again = drain(picker, ready, 1, 18)
    assert again[0] == "critical"
    assert Counter(again[:9])["critical"] <= 6
    assert 9 <= Counter(again)["critical"] <= 11
    assert "bulk" in again
