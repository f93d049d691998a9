"""Every hook a Runnel plugin can implement.

Hooks that contribute named things receive a ``register`` callback instead of returning
values, so one plugin can contribute several and the registry knows who provided what.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    import click

    from runnel.interfaces import Compressor, Middleware, Serializer
    from runnel.jobs.model import Delivery, Outcome
    from runnel.record import Record
    from runnel.services import Services
    from runnel.settings import Settings
    from runnel.store.backend import Backend
    from runnel.store.log import PartitionId

hookspec = pluggy.HookspecMarker("runnel")

#: ``factory(url, settings)``: the store for one URL.
TransportFactory = Callable[[str, "Settings"], "Backend"]
#: ``factory()``: a compressor with its default settings.
CompressorFactory = Callable[[], "Compressor"]


class SerializerFactory(Protocol):
    """``factory(compressor=None)``: a serializer, compressing with ``compressor`` if given."""

    def __call__(self, compressor: Compressor | None = None) -> Serializer: ...


#: The ``register`` callback each registering hook receives.
RegisterTransport = Callable[[str, TransportFactory], None]
RegisterSerializer = Callable[[str, SerializerFactory], None]
RegisterCompressor = Callable[[str, CompressorFactory], None]
#: Any of the above (what the registry actually passes accepts every factory).
Register = Callable[[str, Callable[..., Any]], None]


class SentStream(Protocol):
    """What the instrumentation hooks see of a :class:`runnel.Stream`."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def record(self) -> type[Record]: ...


class StreamProcessor(Protocol):
    """What the instrumentation hooks see of a processor (``@app.processor``)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def stream(self) -> SentStream: ...


class Named(Protocol):
    @property
    def name(self) -> str: ...


class QueuedJob(Protocol):
    """What the instrumentation hooks see of a job function (``@app.job``)."""

    @property
    def name(self) -> str: ...

    @property
    def queue(self) -> str: ...

    @property
    def app(self) -> Named: ...


#: What :func:`runnel_sending` returns: called once with the entry ids, or the exception.
SendDone = Callable[[list[bytes] | None, BaseException | None], None]
#: What :func:`runnel_enqueuing` returns: called once with whether the job was new
#: (``False``: its id existed), or the exception.
EnqueueDone = Callable[[bool | None, BaseException | None], None]
#: What :func:`runnel_job_running` returns: called once with the try's outcome (``None``
#: when it was cancelled or stopped), or the exception that ended it.
RunDone = Callable[["Outcome | None", BaseException | None], None]


@hookspec
def runnel_transports(register: RegisterTransport) -> None:
    """Register stores: ``register(scheme, factory)``.

    ``factory(url, settings)`` returns a :class:`runnel.store.Backend` for URLs whose
    scheme is ``scheme`` (``redis``, ``rediss``, ``unix``, ...).
    """


@hookspec
def runnel_serializers(register: RegisterSerializer) -> None:
    """Register serializers: ``register(name, factory)``; ``factory(compressor=None)``."""


@hookspec
def runnel_compressors(register: RegisterCompressor) -> None:
    """Register compressors: ``register(name, factory)``; ``factory()``."""


@hookspec
def runnel_commands(cli: click.Group) -> None:
    """Add sub-commands (or groups) to the ``runnel`` command line."""


# Instrumentation (tracing). Each is called only when some plugin implements it, so a
# process without such a plugin pays nothing; see runnel.plugins.manager.instruments().


@hookspec
def runnel_processor_middleware(processor: StreamProcessor) -> Middleware | None:
    """A middleware to put first in ``processor``'s chain, before the user's (or None).

    Asked each time the processor function starts on a partition.
    """


@hookspec
def runnel_sending(
    stream: SentStream, entries: list[tuple[PartitionId, dict[bytes, Any]]]
) -> SendDone | None:
    """``stream.send`` is about to append ``entries`` (encoded and routed).

    The hook may add fields to each entry's dict (not to a primitive record's, whose
    fields are the record's own). Returns a callback for the end of the append, or None.
    """


@hookspec
def runnel_enqueuing(job: QueuedJob, job_id: str, headers: dict[str, str]) -> EnqueueDone | None:
    """``job.delay()`` (``delay_sync``, ``runnel jobs send``) is about to encode and enqueue
    call ``job_id``.

    Whatever the hook puts in ``headers`` is stored with the job's arguments and given
    back to :func:`runnel_job_running`. Returns a callback for the end of the enqueue.
    """


@hookspec
def runnel_job_running(
    job: QueuedJob, delivery: Delivery, headers: dict[str, str]
) -> RunDone | None:
    """A worker starts one try of a job (its arguments decoded; ``headers`` as stored).

    Called in the task that runs the job, so context variables set here are seen by the
    job's code. Returns a callback for the end of the try.
    """


@hookspec(firstresult=True)
def runnel_access_rules(app: Services, user: str, password: bool) -> list[str] | None:
    """The commands an operator runs on the app's store to give ``user`` just the access
    the app needs (``runnel acl``), one a line; None if the store is not this plugin's.

    With ``password``, the lines set a placeholder password for the operator to replace
    (never a real one); without, they keep the user's passwords.
    """
