"""Workflows run by a real worker on both stores (memory:// and Redis): chains pass
results, groups keep member order, a chord's callback gets every result, nested forms,
errors (WorkflowFailed, on_error once), cancelling, and bad input refused whole."""

from __future__ import annotations

import asyncio

import pytest

from runnel import App, chain, chord, group
from runnel.jobs import (
    InvalidArguments,
    InvalidWorkflow,
    JobStatus,
    WorkflowCancelled,
    WorkflowFailed,
    WorkflowStatus,
)
from runnel.testing import run


def flow_app(name: str) -> tuple[App, dict[str, list[object]]]:
    app = App(name=name, job_heartbeat_timeout=1, default_grace_period=1)
    seen: dict[str, list[object]] = {"total": [], "report": []}
    gate = asyncio.Event()
    app.gate = gate  # type: ignore[attr-defined]

    @app.job
    async def add(x: int, y: int) -> int:
        return x + y

    @app.job
    async def total(xs: list[int], bonus: int = 0) -> int:
        seen["total"].append(xs)
        return sum(xs) + bonus

    @app.job(retries=0)
    async def boom(x: int) -> int:
        raise ValueError(f"boom {x}")

    @app.job
    async def report(workflow: str, job: str, error: str, tag: str = "") -> None:
        seen["report"].append((workflow, job, error, tag))

    @app.job
    async def wait(x: int) -> int:
        await gate.wait()
        return x

    return app, seen


async def test_a_chain_passes_each_result_on(app_name: str, store_url: str) -> None:
    app, _ = flow_app(app_name)
    add = app.jobs["add"]
    async with run(app, store=store_url) as t:
        handle = await chain(add.s(1, 2), add.s(10), add.s(100)).delay()
        assert await handle.get(timeout=t.wait) == 113
        handle = await (add.s(1, 2) | add.si(5, 5) | add.s(1)).delay()  # si: gets nothing
        assert await handle.get(timeout=t.wait) == 11
        assert await handle.status() == WorkflowStatus.COMPLETE
        members = await handle.members()
        assert [(name, status) for _, name, status in members] == [("add", JobStatus.SUCCESS)] * 3
        record = await app.job_result(members[1][0]).info()
        assert record is not None and record.workflow == handle.id


async def test_a_group_keeps_member_order_and_a_chord_gets_every_result(
    app_name: str, store_url: str
) -> None:
    app, seen = flow_app(app_name)
    add, total = app.jobs["add"], app.jobs["total"]
    async with run(app, store=store_url) as t:
        handle = await group(add.s(i, i) for i in range(12)).delay()
        assert await handle.get(timeout=t.wait) == [2 * i for i in range(12)]
        handle = await chord(group(add.s(i, 1) for i in range(30)), total.s(bonus=1000)).delay()
        assert await handle.get(timeout=t.wait) == sum(range(1, 31)) + 1000
        assert seen["total"] == [list(range(1, 31))]


async def test_nested_forms(app_name: str, store_url: str) -> None:
    app, _ = flow_app(app_name)
    add, total = app.jobs["add"], app.jobs["total"]
    async with run(app, store=store_url) as t:
        # A group of chains, then a callback: each chain's last result, in order.
        inner = group(chain(add.si(i, 1), add.s(10)) for i in range(3))
        handle = await chain(add.s(0, 0) | add.s(1), inner, total.s()).delay()
        assert await handle.get(timeout=t.wait) == 11 + 12 + 13
        # A chain into a group: each member gets the result first.
        handle = await chain(add.s(2, 3), group(add.s(1), add.s(2))).delay()
        assert await handle.get(timeout=t.wait) == [6, 7]
        # A chain after a group of groups: the nested list.
        handle = await group(group(add.s(1, 1), add.s(2, 2)), add.s(3, 3)).delay()
        assert await handle.get(timeout=t.wait) == [[2, 4], 6]


async def test_a_dead_member_fails_the_workflow_and_runs_on_error_once(
    app_name: str, store_url: str
) -> None:
    app, seen = flow_app(app_name)
    add, total, boom, report = (app.jobs[n] for n in ("add", "total", "boom", "report"))
    async with run(app, store=store_url) as t:
        wf = chord([add.s(1, 1), boom.s(7), boom.s(8)], total.s(), on_error=report.s(tag="x"))
        handle = await wf.delay()
        with pytest.raises(WorkflowFailed) as caught:
            await handle.get(timeout=t.wait)
        failed = caught.value
        assert failed.job_name == "boom" and failed.error.startswith("ValueError: boom ")
        assert failed.job_id in str(failed) and "boom" in str(failed)
        assert await handle.status() == WorkflowStatus.FAILED
        statuses = {name: status for _, name, status in await handle.members()}
        assert statuses["total"] == JobStatus.CANCELLED
        await t.join()
        assert seen["report"] == [(handle.id, failed.job_id, failed.error, "x")]
        assert seen["total"] == []


async def test_cancel_a_workflow(app_name: str, store_url: str) -> None:
    app, seen = flow_app(app_name)
    wait, total, report = app.jobs["wait"], app.jobs["total"], app.jobs["report"]
    async with run(app, store=store_url) as t:
        handle = await chord([wait.s(1), wait.s(2)], total.s(), on_error=report.s()).delay()
        async with asyncio.timeout(t.wait):  # both members running
            while {s for _, n, s in await handle.members() if n == "wait"} != {"EXECUTING"}:  # noqa: ASYNC110 (polls the store)
                await asyncio.sleep(0.01)
        assert await handle.cancel() is True
        assert await handle.cancel() is False
        with pytest.raises(WorkflowCancelled):
            await handle.get(timeout=t.wait)
        assert {s for _, _, s in await handle.members()} == {JobStatus.CANCELLED}
        app.gate.set()  # type: ignore[attr-defined]
        await t.join()
        assert seen["total"] == [] and seen["report"] == []


async def test_delay_sync(app_name: str, store_url: str) -> None:
    app, _ = flow_app(app_name)
    add = app.jobs["add"]
    async with run(app, store=store_url) as t:
        handle = await asyncio.to_thread((add.s(1, 1) | add.s(1)).delay_sync)
        assert await asyncio.to_thread(handle.get, t.wait) == 3
        assert await asyncio.to_thread(handle.status) == WorkflowStatus.COMPLETE


async def test_bad_input_is_refused_whole(app_name: str, store_url: str) -> None:
    app, _ = flow_app(app_name)
    add, total = app.jobs["add"], app.jobs["total"]
    with pytest.raises(InvalidArguments, match=r"job 'add': argument 'y': input should be"):
        add.s(1, "seven")
    with pytest.raises(InvalidArguments, match=r"job 'add': too many positional arguments"):
        add.s(1, 2, 3)
    with pytest.raises(InvalidWorkflow, match=r"no job named 'nope' in app .* \(known: add, "):
        app.signature("nope", 1)
    assert app.signature("add", 1, 2).job is add
    looped = group(add.s(1, 1))
    wf = chain(looped, total.s())
    looped.members.append(wf)
    async with run(app, store=store_url) as t:
        with pytest.raises(InvalidWorkflow, match=r"contains itself \(chain -> group -> chain\)"):
            await wf.delay()
        # add.s(1) fits a chain step (the previous result first), not a first step.
        with pytest.raises(InvalidArguments, match=r"job 'add': missing a required argument"):
            await chain(add.s(1), add.s(2)).delay()
        with pytest.raises(InvalidWorkflow, match="a group needs at least one member"):
            await chord([add.s(1, 1), group()], total.s()).delay()
        with pytest.raises(InvalidWorkflow, match="on_error goes on the outermost"):
            await chain(add.s(1, 1), group(add.s(1), on_error=total.s())).delay()
        counts = await t.job_counts()
        assert (counts.queued, counts.executing, counts.scheduled) == (0, 0, 0)
        assert await app.job_store.workflows(10) == []  # type: ignore[attr-defined]
