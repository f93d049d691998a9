"""Job workflows: chains, groups and chords of job calls, enqueued whole, atomically.

```python
wf = chord(group(add.s(i, i) for i in range(100)), total.s(), on_error=report.s())
handle = await wf.delay()             # one store call: every job, waiting or queued
await handle.get(timeout=30)          # the callback's result
```

A workflow compiles to a graph of jobs. Each job knows which jobs wait for it; each
waiting job how many it waits for, and where its predecessors' results come from (in its
payload, under ``input``): the worker reads them from the store when the job starts and
puts them first among its arguments (:func:`prior_inputs`).
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from runnel.exceptions import DecodeError, EncodeError
from runnel.jobs import codec
from runnel.jobs.batching import identified
from runnel.jobs.model import InvalidArguments, JobError, JobNotFound, JobStatus, NewJob, Timeout
from runnel.jobs.signature import Signature, _first_error
from runnel.jobs.workflow_model import (
    WORKFLOW_ENDED,
    FlowJob,
    InvalidWorkflow,
    NewWorkflow,
    WorkflowCancelled,
    WorkflowFailed,
    WorkflowRecord,
    WorkflowStatus,
    leaves,
)
from runnel.metrics import stats
from runnel.store.identity import CallIdentity
from runnel.store.workflows import WorkflowStore

if TYPE_CHECKING:
    from runnel.interfaces import Serializer
    from runnel.services import Services

WAIT_SLICE = 1.0
"""Longest single wait for a workflow's end: between two, it is looked at again."""


class JobOf(Protocol):
    """What a signature needs of the declared job it calls (:class:`JobFunction`)."""

    @property
    def app(self) -> Services: ...
    @property
    def name(self) -> str: ...
    @property
    def signature(self) -> Signature: ...
    @property
    def serializer(self) -> Serializer: ...
    @property
    def codec(self) -> str: ...
    @property
    def retries(self) -> int: ...
    @property
    def queue(self) -> str: ...


class _Given:
    """Stands for an argument the workflow gives (a predecessor's result) in a check."""

    def __repr__(self) -> str:
        return "<given by the workflow>"


GIVEN = _Given()


def check_call(
    sig: Signature, given: int, args: Sequence[Any], kwargs: dict[str, Any], *, partial: bool
) -> None:
    """Raise :class:`InvalidArguments` unless the call binds with ``given`` arguments put
    first by the workflow (all of them if not ``partial``) and every argument passed now
    validates against its annotation."""
    params = sig.signature.parameters
    try:
        bind = sig.signature.bind_partial if partial else sig.signature.bind
        bound = bind(*([GIVEN] * given), *args, **kwargs)
    except TypeError as exc:
        raise InvalidArguments(f"job {sig.name!r}: {exc}") from None
    for pname, adapter in sig.adapters.items():
        if pname not in bound.arguments:
            continue
        value, kind = bound.arguments[pname], params[pname].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            values = list(value)
        elif kind is inspect.Parameter.VAR_KEYWORD:
            values = list(value.values())
        else:
            values = [value]
        for one in values:
            if one is GIVEN:
                continue
            try:
                adapter.validate_python(one)
            except ValidationError as exc:
                raise InvalidArguments(
                    f"job {sig.name!r}: argument {pname!r}: {_first_error(exc)}"
                ) from None


class Workflow:
    """What can be enqueued as a workflow: a signature, a chain, a group or a chord."""

    on_error: JobSignature | None = None

    def __or__(self, other: Workflow) -> Chain:
        if not isinstance(other, Workflow):
            return NotImplemented
        steps = self.steps if isinstance(self, Chain) and self.on_error is None else [self]
        return Chain([*steps, other])

    def describe(self) -> str:
        raise NotImplementedError

    def _app(self) -> Services:
        raise NotImplementedError

    def build(self) -> NewWorkflow:
        """The workflow to store (checked and encoded; nothing sent). Raises
        :class:`InvalidWorkflow` or :class:`InvalidArguments`."""
        return _Builder(self._app()).build(self)

    async def delay(self) -> WorkflowResult:
        """Enqueue every job of the workflow in one atomic store call; its handle."""
        flow = self.build()
        app = self._app()
        if await _enqueue(app, flow):
            _count(app, flow)
        return WorkflowResult(app, flow.id)

    def delay_sync(self) -> SyncWorkflowResult:
        """:meth:`delay` for synchronous code (no event loop needed)."""
        flow = self.build()
        app = self._app()
        if app.portal.call(lambda: _enqueue(app, flow)):
            _count(app, flow)
        return WorkflowResult(app, flow.id).sync()


async def _enqueue(app: Services, flow: NewWorkflow) -> bool:
    """Store the workflow under a call identity: sent again while its reply is lost
    (``send_retries``), it is stored once and reported stored (True) as the first time."""
    store = _store(app)
    settings = app.settings
    identities = settings.idempotent_sends and app.job_store.identities
    producer = app.producer if identities else None

    def send(call: CallIdentity | None) -> Awaitable[bool]:
        if call is None:
            return store.enqueue_workflow(flow)
        return store.enqueue_workflow(flow, call=call)

    what = f"enqueuing workflow {flow.id} ({len(flow.jobs)} jobs)"
    return await identified(producer, settings.send_retries, send, what)


def _count(app: Services, flow: NewWorkflow) -> None:
    """Every job of the workflow counts as enqueued (the jobs metrics), waiting or not."""
    for one in flow.jobs:
        stats.enqueued[app.name, one.job.name, one.job.queue] += 1


class JobSignature(Workflow):
    """One call of a declared job, not enqueued yet: ``resize.s(7, width=200)``.

    In a chain it gets the previous step's result as its first positional argument,
    unless made with ``.si()`` (``immutable``).
    """

    def __init__(
        self,
        job: JobOf,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        *,
        immutable: bool = False,
    ) -> None:
        self.job = job
        self.args = tuple(args)
        self.kwargs = dict(kwargs)
        self.immutable = immutable
        if immutable:
            check_call(job.signature, 0, self.args, self.kwargs, partial=False)
        else:  # where it goes decides if it gets a result first: either may fit, for now
            try:
                check_call(job.signature, 1, self.args, self.kwargs, partial=True)
            except InvalidArguments:
                check_call(job.signature, 0, self.args, self.kwargs, partial=True)

    def __repr__(self) -> str:
        return f"<JobSignature {self.describe()}{'' if not self.immutable else ' (immutable)'}>"

    def describe(self) -> str:
        return self.job.name

    def _app(self) -> Services:
        return self.job.app


class Chain(Workflow):
    """Steps run one after another, each getting the previous one's result."""

    def __init__(self, steps: list[Workflow], on_error: JobSignature | None = None) -> None:
        self.steps = steps
        self.on_error = on_error

    def __repr__(self) -> str:
        return f"<Chain {self.describe()}>"

    def describe(self) -> str:
        return f"chain({', '.join(_short(s) for s in self.steps)})"

    def _app(self) -> Services:
        return _first_app(self)


class Group(Workflow):
    """Members run in parallel; the result is the list of theirs, in member order."""

    def __init__(self, members: list[Workflow], on_error: JobSignature | None = None) -> None:
        self.members = members
        self.on_error = on_error

    def __repr__(self) -> str:
        return f"<Group {self.describe()}>"

    def describe(self) -> str:
        return f"group({_runs(self.members)})"

    def _app(self) -> Services:
        return _first_app(self)


class Chord(Workflow):
    """A group, then a callback that gets the list of the group's results: exactly once."""

    def __init__(self, header: Group, body: Workflow, on_error: JobSignature | None = None) -> None:
        self.header = header
        self.body = body
        self.on_error = on_error

    def __repr__(self) -> str:
        return f"<Chord {self.describe()}>"

    def describe(self) -> str:
        return f"chord({_short(self.header)}, {_short(self.body)})"

    def _app(self) -> Services:
        return _first_app(self)


def chain(*steps: Workflow | Iterable[Workflow], on_error: JobSignature | None = None) -> Chain:
    """Run ``steps`` one after another; each gets the previous result as its first
    positional argument (a ``.si()`` step does not). ``a | b`` is ``chain(a, b)``."""
    return Chain(_parts(steps, "chain"), on_error)


def group(*members: Workflow | Iterable[Workflow], on_error: JobSignature | None = None) -> Group:
    """Run ``members`` in parallel; the result is the list of theirs, in member order."""
    return Group(_parts(members, "group"), on_error)


def chord(
    header: Group | Iterable[Workflow], body: Workflow, on_error: JobSignature | None = None
) -> Chord:
    """Run the group ``header``, then ``body`` with the list of its results first."""
    if not isinstance(header, Group):
        header = Group(_parts((header,), "chord"))
    if not isinstance(body, Workflow):
        raise InvalidWorkflow(f"a chord's callback must be a signature, not {body!r}")
    return Chord(header, body, on_error)


def _parts(given: Sequence[Any], what: str) -> list[Workflow]:
    if len(given) == 1 and not isinstance(given[0], Workflow) and isinstance(given[0], Iterable):
        given = list(given[0])
    parts = list(given)
    for part in parts:
        if not isinstance(part, Workflow):
            raise InvalidWorkflow(
                f"a {what} takes signatures (job.s(...)), chains and groups, not {part!r}"
            )
    return parts


def _children(part: Workflow) -> list[Workflow]:
    if isinstance(part, Chain):
        return part.steps
    if isinstance(part, Group):
        return part.members
    if isinstance(part, Chord):
        return [part.header, part.body]
    return []


def _first_app(part: Workflow) -> Services:
    seen: set[int] = set()
    todo = [part]
    while todo:
        one = todo.pop()
        if isinstance(one, JobSignature):
            return one.job.app
        if id(one) in seen:
            continue
        seen.add(id(one))
        todo.extend(reversed(_children(one)))
    raise InvalidWorkflow("a workflow needs at least one job")


def _short(part: Workflow) -> str:
    return part.describe() if not isinstance(part, Chain | Group | Chord) else _describe(part)


def _describe(part: Workflow, depth: int = 0) -> str:
    if depth > 8:
        return "..."
    if isinstance(part, Chain):
        return f"chain({', '.join(_describe(s, depth + 1) for s in part.steps)})"
    if isinstance(part, Group):
        return f"group({_runs(part.members, depth)})"
    if isinstance(part, Chord):
        return f"chord({_describe(part.header, depth + 1)}, {_describe(part.body, depth + 1)})"
    return part.describe()


def _runs(members: list[Workflow], depth: int = 0) -> str:
    """Members described, runs of one job name counted: ``add x 200, total``."""
    out: list[str] = []
    last, count = "", 0
    for text in [_describe(m, depth + 1) for m in members] + [""]:
        if text == last:
            count += 1
            continue
        if last:
            out.append(last if count == 1 else f"{last} x {count}")
        last, count = text, 1
    return ", ".join(out)


class _Builder:
    """Compiles a workflow into its jobs: each part is given the result expression of
    what precedes it (None: nothing) and returns the expression of its own result."""

    def __init__(self, app: Services) -> None:
        self.app = app
        self.jobs: list[FlowJob] = []
        self.by_id: dict[str, FlowJob] = {}
        self.path: list[Workflow] = []
        self.now = app.clock.now()
        self.flow_id = os.urandom(16).hex()

    def build(self, root: Workflow) -> NewWorkflow:
        result = self.add(root, None, outermost=True)
        if not self.jobs:
            raise InvalidWorkflow("a workflow needs at least one job")
        if root.on_error is not None:
            wanted = {"failure": self.flow_id}
            self.job(root.on_error, None, given=3, input=wanted).on_error = True
        shape = _describe(root)
        return NewWorkflow(
            id=self.flow_id,
            shape=shape if len(shape) <= 200 else shape[:197] + "...",
            created=self.now,
            jobs=self.jobs,
            result=result,
        )

    def add(self, part: Workflow, before: Any, *, outermost: bool = False) -> Any:
        if any(part is p for p in self.path):
            trail = " -> ".join(type(p).__name__.lower() for p in [*self.path, part])
            raise InvalidWorkflow(f"the workflow contains itself ({trail})")
        if part.on_error is not None and not outermost:
            raise InvalidWorkflow("on_error goes on the outermost chain, group or chord only")
        self.path.append(part)
        try:
            if isinstance(part, JobSignature):
                wanted = None if before is None or part.immutable else {"from": before}
                return self.job(part, before, given=0 if wanted is None else 1, input=wanted).job.id
            if isinstance(part, Chain):
                if not part.steps:
                    raise InvalidWorkflow("a chain needs at least one step")
                for step in part.steps:
                    before = self.add(step, before)
                return before
            if isinstance(part, Group):
                if not part.members:
                    raise InvalidWorkflow("a group needs at least one member")
                return [self.add(member, before) for member in part.members]
            if isinstance(part, Chord):
                return self.add(part.body, self.add(part.header, before))
            raise InvalidWorkflow(f"not a workflow part: {part!r}")
        finally:
            self.path.pop()

    def job(self, sig: JobSignature, before: Any, *, given: int, input: Any) -> FlowJob:
        fn = sig.job
        if fn.app is not self.app:
            raise InvalidWorkflow(
                f"job {fn.name!r} belongs to another app: a workflow's jobs share one app"
            )
        check_call(fn.signature, given, sig.args, sig.kwargs, partial=False)
        value: dict[str, Any] = {"args": sig.args}
        if sig.kwargs:
            value["kwargs"] = sig.kwargs
        if input is not None:
            value["input"] = input
        try:
            payload = codec.encode(fn.serializer, value)
        except Exception as exc:  # the serializer or the user's values
            raise EncodeError(f"job {fn.name!r}: cannot encode the arguments: {exc}") from None
        new = NewJob(
            id=os.urandom(16).hex(),
            name=fn.name,
            payload=payload,
            codec=fn.codec,
            retries=fn.retries,
            results=True,  # a workflow reads its jobs' results, whatever the app's setting
            created=self.now,
            queue=fn.queue,
        )
        deps = list(dict.fromkeys(leaves(before))) if before is not None else []
        one = FlowJob(new, waits=len(deps))
        for dep in deps:
            self.by_id[dep].then.append(new.id)
        self.jobs.append(one)
        self.by_id[new.id] = one
        return one


def _store(app: Services) -> WorkflowStore:
    store = app.job_store
    if not isinstance(store, WorkflowStore):
        raise JobError(f"the store {type(store).__name__} does not offer workflows")
    return store


async def results_of(store: WorkflowStore, expr: Any) -> Any:
    """The value of a result expression: each job id replaced by that job's result."""
    ids = list(dict.fromkeys(leaves(expr)))
    items = await store.member_results(ids)
    values: dict[str, Any] = {}
    for job_id, (codec_name, item) in zip(ids, items, strict=True):
        if item is None:
            raise DecodeError(f"the result of job {job_id} is gone (expired or purged)")
        ok, value = codec.read_item(codec.serializer_named(codec_name), item)
        if not ok:
            raise DecodeError(f"job {job_id} has no result: {value.type}: {value.message}")
        values[job_id] = value

    def fill(part: Any) -> Any:
        return values[part] if isinstance(part, str) else [fill(p) for p in part]

    return fill(expr)


async def prior_inputs(store: Any, wanted: Any) -> list[Any]:
    """The arguments a workflow's job gets first: its predecessors' results, or for the
    error handler (workflow id, failed job id, error text). :class:`DecodeError` if
    they cannot be had (the job cannot run, ever)."""
    if not isinstance(store, WorkflowStore):
        raise DecodeError("this store does not offer workflows")
    if isinstance(wanted, dict) and "from" in wanted:
        return [await results_of(store, wanted["from"])]
    if isinstance(wanted, dict) and "failure" in wanted:
        flow_id = str(wanted["failure"])
        record = await store.workflow(flow_id)
        if record is None:
            raise DecodeError(f"workflow {flow_id} is gone (expired)")
        return [flow_id, record.failed or "", record.error or ""]
    raise DecodeError(f"unknown workflow input {wanted!r}")


class WorkflowResult:
    """An enqueued workflow: its status, members and result; :meth:`cancel` it."""

    def __init__(self, app: Services, workflow_id: str) -> None:
        self.app = app
        self.id = workflow_id

    def __repr__(self) -> str:
        return f"<WorkflowResult {self.id}>"

    async def info(self) -> WorkflowRecord | None:
        return await _store(self.app).workflow(self.id)

    async def status(self) -> WorkflowStatus:
        record = await self.info()
        return WorkflowStatus.UNKNOWN if record is None else record.status

    async def members(self) -> list[tuple[str, str, JobStatus]]:
        """Every job of the workflow: (id, name, status), in the order written (the
        error handler, if any, last)."""
        record = await self._record()
        return [(m.id, m.name, m.status) for m in record.members]

    async def cancel(self) -> bool:
        """Cancel the workflow unless it has ended: True if this call cancelled it. Its
        waiting jobs (the error handler too) are cancelled, then its queued and running
        ones; ``get()`` raises :class:`WorkflowCancelled`."""
        before = await _store(self.app).cancel_workflow(
            self.id, self.app.clock.now(), self.app.settings.results_ttl
        )
        if before is WorkflowStatus.UNKNOWN:
            raise JobNotFound(f"no workflow with id {self.id!r}")
        return before is WorkflowStatus.RUNNING

    async def get(self, timeout: float | None = None) -> Any:  # noqa: ASYNC109 (the API)
        """The workflow's result: the last step's, a group's list, or the callback's.

        Raises :class:`WorkflowFailed` (naming the job that failed it),
        :class:`WorkflowCancelled`, :class:`Timeout` or :class:`JobNotFound`.
        """
        store = _store(self.app)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + max(0.0, timeout)
        while True:
            record = await self._record()
            if record.status in WORKFLOW_ENDED:
                return await self._outcome(store, record)
            left = WAIT_SLICE if deadline is None else min(WAIT_SLICE, deadline - loop.time())
            if left <= 0:
                raise Timeout(f"workflow {self.id!r} did not finish within {timeout}s")
            await store.wait_workflow(self.id, left)

    async def _record(self) -> WorkflowRecord:
        record = await _store(self.app).workflow(self.id)
        if record is None:
            raise JobNotFound(f"no workflow with id {self.id!r}")
        return record

    async def _outcome(self, store: WorkflowStore, record: WorkflowRecord) -> Any:
        if record.status is WorkflowStatus.CANCELLED:
            raise WorkflowCancelled(self.id)
        if record.status is WorkflowStatus.FAILED:
            failed = record.member(record.failed or "")
            name = failed.name if failed is not None else "?"
            raise WorkflowFailed(self.id, record.failed or "", name, record.error or "")
        return await results_of(store, record.result)

    def sync(self) -> SyncWorkflowResult:
        return SyncWorkflowResult(self)


class SyncWorkflowResult:
    """:class:`WorkflowResult` for synchronous code: the same methods, blocking."""

    def __init__(self, handle: WorkflowResult) -> None:
        self._handle = handle
        self.id = handle.id

    def __repr__(self) -> str:
        return f"<SyncWorkflowResult {self.id}>"

    def status(self) -> WorkflowStatus:
        return self._handle.app.portal.call(self._handle.status)

    def members(self) -> list[tuple[str, str, JobStatus]]:
        return self._handle.app.portal.call(self._handle.members)

    def info(self) -> WorkflowRecord | None:
        return self._handle.app.portal.call(self._handle.info)

    def cancel(self) -> bool:
        return self._handle.app.portal.call(self._handle.cancel)

    def get(self, timeout: float | None = None) -> Any:
        return self._handle.app.portal.call(lambda: self._handle.get(timeout))
