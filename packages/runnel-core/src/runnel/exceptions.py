"""The exceptions Runnel raises on purpose."""


class RunnelError(Exception):
    """Base class of every error Runnel raises itself."""


RunnelException = RunnelError
"""runnel 0.1's name for the base class of its errors."""


class Misconfigured(RunnelError):
    """The application, a stream or a processor is defined in a way that cannot work."""


class UnknownPlugin(Misconfigured):
    """A serializer, compressor or transport was asked for by a name no plugin provides."""


class DecodeError(RunnelError):
    """An event's stored bytes could not be turned back into its record."""


class EncodeError(RunnelError):
    """A valid record could not be encoded by its stream's serializer (nothing was sent)."""


class EntryIdError(RunnelError, ValueError):
    """Explicit entry ids given to ``send(..., stream_ids=...)`` are malformed, out of
    order, or not above the last id of their partition (nothing was sent)."""


class IdentityError(RunnelError, ValueError):
    """Identities given to an append (``send(..., keys=...)``, a store's ``identity=``)
    are malformed: not one per record, numbers not rising within a partition, given with
    explicit entry ids (nothing was sent)."""


class SchemaIncompatible(Misconfigured):
    """A record's schema cannot be used with the schemas already stored for its stream."""


class TransportError(RunnelError):
    """A call to the store failed. Store plugins raise this (or a subclass) for every
    failure of the store itself, so core retries those and nothing else: any other
    exception out of a store call is a bug, and surfaces.
    """


class StateUnavailable(TransportError):
    """The store did not answer a read that the state of the partition being processed
    needed (a table's keys, a window clock). Not the processor's failure: its exception
    policy does not apply; the iteration is rolled back and handled again once the store
    answers."""


class Unavailable(TransportError):
    """The store could not be reached or did not answer in time (connection refused or
    dropped, a timeout, a server still loading or failing over). Worth retrying."""


class NotConnected(Unavailable):
    """The store could not be reached: the call found no connection and could not open
    one, so it sent nothing. Any other Unavailable may come after a write was sent (a
    reply that timed out, a connection dropped while waiting), which may have happened."""


class GroupMissing(TransportError):
    """A consumer group a worker reads in is not in the store: the store lost its data
    since the worker made it (a restart without persistence, a failover to an empty
    replica, the keys deleted). The worker makes it again and reads on."""


class AccessDenied(TransportError):
    """The store refused our credentials or a command (a wrong password, a missing ACL
    permission). Retrying cannot help, so workers stop on it instead of waiting.

    ``user`` and ``command`` name who was refused what; the password never appears.
    """

    def __init__(self, message: str, user: str | None = None, command: str | None = None):
        super().__init__(message)
        self.user = user
        self.command = command


class StoreFull(TransportError):
    """The store is out of memory and refuses writes (Redis at ``maxmemory``)."""


class NotReplicated(RunnelError):
    """A write is in the store, but fewer replicas than ``wait_replicas`` acknowledged it
    within ``wait_timeout``: it may be lost if its master fails now."""

    def __init__(self, message: str, wanted: int, acknowledged: int):
        super().__init__(message)
        self.wanted = wanted
        self.acknowledged = acknowledged


class PartlySent(RunnelError):
    """Some records of a send are in the store and others are not (a store that cannot
    write a batch whole: Redis Cluster, one group per partition). ``ids[i]`` is the entry
    id of record ``i`` if it is in the store, else None. ``in_doubt``: some of the others
    may be in too (a reply was lost), else none of them is. ``identified``: those others
    carry the send's identity, so sending the same call again appends none of them twice
    (``send()`` does, ``idempotent_sends``)."""

    def __init__(
        self,
        message: str,
        ids: list[bytes | None],
        in_doubt: bool = False,
        *,
        identified: bool = False,
    ):
        super().__init__(message)
        self.ids = ids
        self.in_doubt = in_doubt
        self.identified = identified

    @property
    def sent(self) -> list[int]:
        """The indexes of the records that are in the store."""
        return [i for i, entry in enumerate(self.ids) if entry is not None]


class PartitionFull(PartlySent):
    """A partition is at its ``partition_size`` and what fills it is entries a processor
    has not acknowledged yet, which Runnel does not trim by default (a stream's
    ``on_full="wait"``). :meth:`Stream.send` waits ``full_timeout`` seconds for the
    processor to make room, then raises this. ``ids`` say which records are in the store,
    as for :class:`PartlySent` (on one Redis or in memory: none of them).

    ``stream`` and ``partition`` name the full partition, ``processor`` the slowest
    consumer group, the one holding the oldest unacknowledged entry there.
    """

    def __init__(
        self,
        message: str,
        ids: list[bytes | None],
        stream: str,
        partition: int,
        processor: str | None,
        size: int,
    ):
        super().__init__(message, ids)
        self.stream = stream
        self.partition = partition
        self.processor = processor
        self.size = size


class TableError(RunnelError):
    """A table used in a way that cannot work: outside the processor of its source
    stream, by a second processor, with a key that is not loaded, or a value that cannot
    be encoded (nothing of that iteration is committed)."""


class WrongPartition(TableError):
    """A table key that belongs to another partition than the event being handled."""
