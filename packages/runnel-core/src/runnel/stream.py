"""Streams: a named, partitioned log of one record type, and how records become entries."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Generic

from pydantic import ValidationError
from typing_extensions import TypeVar

from runnel import resend
from runnel.backpressure import too_big, wait_for_room
from runnel.codecs.fidelity import JSON, problem
from runnel.codecs.resolve import resolve_serializer
from runnel.exceptions import (
    DecodeError,
    EncodeError,
    EntryIdError,
    IdentityError,
    Misconfigured,
    PartitionFull,
    SchemaIncompatible,
)
from runnel.interfaces import Serializer
from runnel.plugins.instruments import finish, instruments
from runnel.record import Record
from runnel.store.identity import (
    DEFAULT_WINDOW,
    Appended,
    Identity,
    KeyedIdentity,
    Window,
    covers_all,
    key_bytes,
)
from runnel.store.log import Fields as EntryFields
from runnel.store.log import PartitionId
from runnel.types import Event, Fields, Partition

if TYPE_CHECKING:
    from runnel.services import Services
    from runnel.tables import TableBase

DATA = b"data"
"""The single stream field that holds a serialized (non-primitive) record."""

R = TypeVar("R", bound=Record, default=Any)
"""A stream's record type: ``app.stream(..., record=Order)`` is a ``Stream[Order]``, whose
``send`` a type checker lets take only ``Order`` records. A bare ``Stream`` annotation
means ``Stream[Any]``, as before streams were generic."""


class Stream(Generic[R]):
    """A logical stream of ``record`` events split over ``partition_count`` partitions.

    Create streams with :meth:`runnel.App.stream`. A record goes to partition
    ``hasher(key) % partition_count`` where ``key`` is its ``partition_by`` field (or
    ``partition_by(record)`` when that is a function), so all events of one key stay in one
    partition, in the order they were sent.
    """

    def __init__(
        self,
        app: Services,
        name: str,
        record: type[R],
        partition_by: str | Callable[[Any], Any],
        partition_count: int,
        partition_size: int,
        serializer: Serializer | None,
        hasher: Callable[[Any], int],
        on_full: str = "wait",
        idempotence: Window = DEFAULT_WINDOW,
        idempotency_key: str | None = None,
    ) -> None:
        if not (isinstance(record, type) and issubclass(record, Record)):
            raise Misconfigured(
                f"stream {name!r}: record must be a Record subclass, not {record!r}"
            )
        if isinstance(partition_by, str) and partition_by not in record.model_fields:
            raise Misconfigured(
                f"stream {name!r}: partition_by={partition_by!r} "
                f"is not a field of {record.__name__}"
            )
        if not isinstance(partition_by, str) and not callable(partition_by):
            raise Misconfigured(f"stream {name!r}: partition_by must be a field name or a function")
        if partition_count < 1 or partition_size < 1:
            raise Misconfigured(f"stream {name!r}: partition_count and partition_size must be >= 1")
        if on_full not in ("wait", "drop_oldest"):
            raise Misconfigured(
                f"stream {name!r}: on_full must be 'wait' or 'drop_oldest', not {on_full!r}"
            )
        if idempotency_key is not None and idempotency_key not in record.model_fields:
            raise Misconfigured(
                f"stream {name!r}: idempotency_key={idempotency_key!r} "
                f"is not a field of {record.__name__}"
            )
        if not isinstance(idempotence, Window):
            raise Misconfigured(f"stream {name!r}: idempotence must be a Window")
        if record.is_primitive() and serializer is not None:
            raise Misconfigured(
                f"stream {name!r}: {record.__name__} is a primitive record, stored as native "
                "field/value pairs: it cannot have a serializer"
            )
        self._given: dict[str, Any] = {
            "app": app,
            "name": name,
            "record": record,
            "partition_by": partition_by,
            "partition_count": partition_count,
            "partition_size": partition_size,
            "serializer": serializer,
            "hasher": hasher,
            "on_full": on_full,
            "idempotence": idempotence,
            "idempotency_key": idempotency_key,
        }
        self.app = app
        self.name = name
        self.record = record
        self.partition_by = partition_by
        self.partition_count = partition_count
        self.partition_size = partition_size
        self.on_full = on_full
        self.idempotence = idempotence
        """How long, and how many, call identities and keys each partition remembers."""
        self.idempotency_key = idempotency_key
        """The record field whose value is a record's key: a record whose key its
        partition took within :attr:`idempotence` is not appended again."""
        self.tables: list[TableBase] = []
        """The tables kept per partition of this stream (``app.table(source=...)``)."""
        self.readers: list[str] = []
        """The names of the processors declared on this stream."""
        if record.is_primitive() or serializer is None:
            self.serializer = None
        else:
            bind = getattr(serializer, "bind", None)
            self.serializer = bind(record) if bind is not None else serializer
        self.hasher = hasher
        self._partitions: list[Partition] | None = None
        self._keys: list[PartitionId] | None = None
        self._primitive = record.is_primitive()
        self._dump_mode = getattr(self.serializer, "dump_mode", "json")
        # Serializers with stored schemas (Avro) take part in preparing and reading.
        self.has_schemas: bool = self.serializer is not None and (
            type(self.serializer).unknown is not Serializer.unknown
            or type(self.serializer).prepare is not Serializer.prepare
        )
        self._prepared: set[bool] = set()
        self._decode = self._decoder()
        self._encode = self._encoder()

    def __repr__(self) -> str:
        return f"<Stream {self.app.name}.{self.name} partitions={self.partition_count}>"

    @property
    def id(self) -> str:
        return f"{self.app.name}.{self.name}"

    @property
    def partitions(self) -> list[Partition]:
        if self._partitions is None:
            key_of = self.app.store.log.partition_key
            ids = [PartitionId(self.app.name, self.name, n) for n in range(self.partition_count)]
            self._partitions = [Partition(self, p.number, p, key_of(p)) for p in ids]
        return self._partitions

    def partition_id(self, number: int) -> PartitionId:
        """Partition ``number``'s name in the store."""
        return self.partitions[number].id

    # Routing.

    def key_of(self, record: Record) -> Any:
        if isinstance(self.partition_by, str):
            return getattr(record, self.partition_by)
        return self.partition_by(record)

    def partition_number(self, record: Record) -> int:
        return self.hasher(self.key_of(record)) % self.partition_count

    def partition_for(self, record: Record) -> Partition:
        return self.partitions[self.partition_number(record)]

    # runnel 0.1's names for the above.

    def partition_key(self, i: int) -> str:
        """The store key of partition ``i`` (0.1's name; new code uses ``partitions[i].key``)."""
        return self.app.store.log.partition_key(PartitionId(self.app.name, self.name, i))

    def all_partition_keys(self) -> list[str]:
        return [p.key for p in self.partitions]

    def hash(self, key: Any) -> int:
        """The partition number of partition key ``key`` (not of a record: see
        :meth:`partition_number`)."""
        return self.hasher(key) % self.partition_count

    def route(self, key: Any) -> str:
        """The store key of the partition that partition key ``key`` goes to."""
        return self.partition_key(self.hash(key))

    def serialize(self, record: Record) -> dict[bytes, Any]:
        """0.1's name for :meth:`encode`."""
        return self.encode(record)

    def deserialize(self, fields: Fields) -> Record:
        """0.1's name for :meth:`decode`."""
        return self.decode(fields)

    def clone(self, **changes: Any) -> Stream:
        """A new stream like this one with some constructor arguments changed (0.1's
        ``dataclasses.replace``); it is not registered with the app."""
        return Stream(**{**self._given, **changes})

    # Encoding.

    def validate(self, value: Record | dict[str, Any]) -> R:
        """A record of this stream's type from a record or a plain dict (raises if invalid)."""
        if isinstance(value, self.record):
            return value
        if isinstance(value, Record):
            value = value.model_dump()
        return self.record.model_validate(value)

    def encode(self, record: Record) -> dict[bytes, Any]:
        """The field/value pairs stored for ``record``."""
        return self._encode(record)

    def _encoder(self) -> Callable[[Record], dict[bytes, Any]]:
        """How this stream's records become entries, chosen once."""
        if self._primitive:
            return lambda r: {k.encode(): _primitive_value(k, v) for k, v in r.__dict__.items()}
        serializer = self.serializer
        assert serializer is not None
        data = getattr(serializer, "dumps_record", None)
        if data is None:  # a duck-typed serializer with only dumps/loads
            dumps, mode = serializer.dumps, self._dump_mode

            def data(r: Record) -> bytes:
                return dumps(r.model_dump(mode=mode))

        compressor = serializer.compressor
        if compressor is None:
            return lambda r: {DATA: data(r)}
        compress = compressor.compress
        return lambda r: {DATA: compress(data(r))}

    def _decoder(self) -> Callable[[Fields], Record]:
        """How this stream's entries become records, chosen once."""
        record = self.record
        if self._primitive:
            validate = record.__pydantic_validator__.validate_python
            return lambda fields: validate({k.decode(): v for k, v in fields.items()})
        serializer = self.serializer
        assert serializer is not None
        loads = getattr(serializer, "loads_record", None)
        if loads is None:  # a duck-typed serializer with only dumps/loads
            validate, plain = record.__pydantic_validator__.validate_python, serializer.loads

            def loads(_: type[Record], data: bytes) -> Record:
                return validate(plain(data))

        compressor = serializer.compressor
        if compressor is None:
            return lambda fields: loads(record, fields[DATA])
        decompress = compressor.decompress
        return lambda fields: loads(record, decompress(fields[DATA]))

    def decode(self, fields: Fields) -> Record:
        """The record stored in an entry's fields; :class:`DecodeError` if it cannot be."""
        try:
            return self._decode(fields)
        except KeyError:
            raise DecodeError(f"{self.name}: entry has no {DATA!r} field") from None
        except ValidationError as exc:
            raise DecodeError(
                f"{self.name}: stored data is not a valid {self.record.__name__}: {exc}"
            ) from exc
        except Exception as exc:  # the serializer (a plugin) or stored data
            raise DecodeError(f"{self.name}: cannot decode entry: {exc!r}") from exc

    # Schemas.

    async def prepare(self, *, writing: bool) -> None:
        """Let the serializer store or load its schemas; once per direction.

        Raises :class:`~runnel.exceptions.SchemaIncompatible` when the record's schema
        cannot be used with those already stored for this stream.
        """
        if not self.has_schemas or writing in self._prepared:
            return
        assert self.serializer is not None
        store = self.app.store.schema_store(self.app.name, self.name)
        try:
            await self.serializer.prepare(store, writing=writing)
        except SchemaIncompatible as exc:
            raise SchemaIncompatible(f"stream {self.id!r}: {exc}") from None
        self._prepared.add(writing)

    async def admit(self, events: list[Event]) -> None:
        """Before ``events`` are delivered: load any schema they need that is not loaded."""
        if not self.has_schemas:
            return
        serializer = self.serializer
        assert serializer is not None
        compressor = serializer.compressor
        for event in events:
            data = event.data.get(DATA)
            if data is None:
                continue
            try:
                if compressor is not None:
                    data = compressor.decompress(data)
                unknown = serializer.unknown(data)
            except Exception:  # serializer code; decoding reports it under the policy
                continue  # decoding will fail and say why, under the exception policy
            if unknown:
                store = self.app.store.schema_store(self.app.name, self.name)
                await serializer.refresh(store)
                return

    # Sending.

    async def send(
        self,
        *records: R,
        stream_ids: Sequence[str | bytes] | None = None,
        keys: Sequence[Any] | None = None,
    ) -> Appended:
        """Append records to their partitions in one round trip; return their ids.

        On one Redis (and in memory) a send is all or none. On a Redis Cluster each
        partition's records are, and a failure after some partitions took theirs raises
        :class:`~runnel.exceptions.PartlySent`, whose ``ids`` say which records are in.

        A send carries its call's identity (``idempotent_sends``): one whose reply was
        lost is sent again (``send_retries``) and appends nothing twice. ``keys`` (or the
        stream's ``idempotency_key`` field) gives each record a key of the application:
        a record whose key its partition took within the stream's idempotence window is
        not appended again, and its id in the reply is the original one.
        :attr:`Appended.duplicates` counts such records (docs/guide.md).

        ``stream_ids`` (runnel 0.1's argument) gives each record's entry id, in the same
        order: ``"*"`` lets the store pick one, else ``"MS-SEQ"`` (or ``"MS"``, meaning
        ``MS-0``) must be above every id its partition had before and above the ids sent
        before it to that partition. Any bad id raises :class:`EntryIdError` and nothing
        is sent. Empty or None: ``"*"`` for every record. Not with keys.
        """
        if not records:
            return Appended()
        if keys is None and self.idempotency_key is not None:
            records = tuple(map(self.validate, records))
            keys = [getattr(r, self.idempotency_key) for r in records]
        entries = self.entries(records)
        ids = None
        if stream_ids:
            if keys is not None:
                raise IdentityError(
                    f"stream {self.id!r}: records with keys cannot have explicit entry ids "
                    "(stream_ids); nothing was sent"
                )
            try:
                ids = explicit_ids(stream_ids, [key for key, _ in entries])
            except ValueError as exc:
                raise EntryIdError(f"stream {self.id!r}: {exc}; nothing was sent") from None
        identity = self._keyed(keys, len(entries)) if keys is not None else None
        return await self.send_entries(entries, ids, identity)

    async def send_entries(
        self,
        entries: list[tuple[PartitionId, Fields]],
        ids: list[str] | None = None,
        identity: Identity | None = None,
    ) -> Appended:
        """:meth:`send`'s second half, for entries made by :meth:`entries`: for a caller
        with an identity of its own (``runnel sendmany`` numbers its lines)."""
        if True not in self._prepared:
            await self.prepare(writing=True)
        sending = instruments().sending
        if sending is not None:
            return await self._send_instrumented(
                sending(stream=self, entries=entries), entries, ids, identity
            )
        try:
            return await self.append(entries, ids, identity)
        except EntryIdError as exc:
            raise EntryIdError(f"stream {self.id!r}: {exc}; nothing was sent") from None

    def _keyed(self, keys: Sequence[Any], count: int) -> KeyedIdentity:
        if isinstance(keys, str | bytes) or len(keys) != count:
            raise IdentityError(
                f"stream {self.id!r}: give keys as a list of one key per record "
                f"({count}); nothing was sent"
            )
        return KeyedIdentity([key_bytes(key) for key in keys])

    async def _send_instrumented(
        self,
        done: list[Any],
        entries: list[tuple[PartitionId, Fields]],
        ids: list[str] | None,
        identity: Identity | None,
    ) -> Appended:
        """:meth:`send`'s append with plugins told of its end (tracing: the send's span)."""
        try:
            sent = await self.append(entries, ids, identity)
        except EntryIdError as exc:
            error = EntryIdError(f"stream {self.id!r}: {exc}; nothing was sent")
            finish(done, None, error)
            raise error from None
        except BaseException as exc:
            finish(done, None, exc)
            raise
        finish(done, sent, None)
        return sent

    def entries(
        self, records: Sequence[Record | dict[str, Any]]
    ) -> list[tuple[PartitionId, Fields]]:
        """Records as the entries :meth:`send` appends: validated, routed, encoded."""
        keys = self._keys
        if keys is None:
            keys = self._keys = [p.id for p in self.partitions]
        validate, number, encode = self.validate, self.partition_number, self._encode
        entries: list[tuple[PartitionId, Fields]] = []
        for value in records:
            record = validate(value)
            key = keys[number(record)]
            try:
                entries.append((key, encode(record)))
            except Exception as exc:  # the serializer (a plugin) or the user's record
                raise self._encode_error(record, len(entries), len(records), exc) from exc
        return entries

    async def append(
        self,
        entries: Sequence[tuple[PartitionId, EntryFields]],
        ids: Sequence[str] | None = None,
        identity: Identity | None = None,
    ) -> Appended:
        """Store encoded entries in this stream's partitions, held to ``partition_size``
        as ``on_full`` says: a full partition is waited for (``full_timeout``), or its
        oldest entries are dropped and counted as lost (docs/guide.md).

        Without ``identity`` or ``ids``, the append carries its call's identity when
        ``idempotent_sends`` is on and the store has identities. With that setting on,
        an append whose every entry has an identity is sent again while its reply is
        lost (``send_retries``)."""
        settings = self.app.settings
        log = self.app.store.log
        if identity is None and ids is None and settings.idempotent_sends and log.identities:
            identity = self.app.producer.call()
        if not (settings.idempotent_sends and covers_all(identity)):
            sent = await self._append(entries, ids, identity)
        else:

            def attempt(again: bool) -> Awaitable[Appended]:
                assert identity is not None
                return self._append(entries, ids, identity.retried() if again else identity)

            what = f"sending {len(entries)} records to stream {self.id!r}"
            sent = await resend.resending(attempt, settings.send_retries, what)
        if sent.duplicates:
            resend.duplicates[self.app.name, self.name] += sent.duplicates
        return sent

    async def _append(
        self,
        entries: Sequence[tuple[PartitionId, EntryFields]],
        ids: Sequence[str] | None,
        identity: Identity | None,
    ) -> Appended:
        drop = self.on_full == "drop_oldest"
        maxlen = self.partition_size
        log = self.app.store.log
        window = self.idempotence
        try:
            if identity is None:
                return await log.append(entries, maxlen=maxlen, ids=ids, drop_oldest=drop)
            return await log.append(
                entries, maxlen=maxlen, drop_oldest=drop, identity=identity, window=window
            )
        except PartitionFull as refused:
            if (error := too_big(entries, maxlen)) is not None:
                raise error from None

            def again(todo: Sequence[int]) -> Awaitable[Appended]:
                some = [entries[i] for i in todo]
                if identity is not None:
                    part = identity.subset(todo)
                    return log.append(
                        some, maxlen=maxlen, drop_oldest=drop, identity=part, window=window
                    )
                at = [ids[i] for i in todo] if ids is not None else None
                return log.append(some, maxlen=maxlen, ids=at, drop_oldest=drop)

            timeout = self.app.settings.full_timeout
            return await wait_for_room(again, len(entries), refused, timeout)

    def _encode_error(self, record: Record, index: int, count: int, exc: Exception) -> EncodeError:
        """The serializers' own :class:`EncodeError` names the field at fault; anything
        else (a plugin's failure) is named by its type."""
        where = f" (record {index + 1} of {count})" if count > 1 else ""
        said = str(exc) if isinstance(exc, EncodeError) else f"{type(exc).__name__}: {exc}"
        return EncodeError(
            f"stream {self.id!r}: cannot encode {type(record).__name__}{where}, nothing was "
            f"sent: {said}"
        )


def idempotence_window(stream: str, seconds: Any, keys: Any) -> Window:
    """A stream's idempotence window from its arguments or the app's defaults."""
    try:
        return Window(float(seconds), keys)
    except (IdentityError, TypeError, ValueError) as exc:
        raise Misconfigured(f"stream {stream!r}: idempotence: {exc}") from None


def stream_serializer(record: type[Record], given: Any, default: Any) -> Serializer | None:
    """None for a primitive record (the stream refuses one given, as runnel 0.1 did), else
    the serializer given or the default."""
    if record.is_primitive() and given is None:
        return None
    return resolve_serializer(given if given is not None else default)


MAX_ID_PART = 2**64 - 1


def parse_entry_id(given: str | bytes) -> tuple[int, int] | None:
    """``(ms, seq)`` of an explicit entry id, None for ``"*"``; ``ValueError`` if bad."""
    text = given.decode("ascii", "replace") if isinstance(given, bytes) else given
    if not isinstance(text, str):
        raise ValueError(f"an entry id is a str, not {given!r}")
    if text == "*":
        return None
    ms, dash, seq = text.partition("-")
    parts = (ms, seq) if dash else (ms, "0")
    if not all(p.isascii() and p.isdigit() for p in parts):
        raise ValueError(f"bad entry id {text!r}: use '*', 'MS-SEQ' or 'MS' (decimal integers)")
    parsed = (int(parts[0]), int(parts[1]))
    if max(parsed) > MAX_ID_PART:
        raise ValueError(f"bad entry id {text!r}: MS and SEQ must be below 2**64")
    if parsed == (0, 0):
        raise ValueError("entry id 0-0 is not allowed: ids must be above 0-0")
    return parsed


def explicit_ids(given: Sequence[str | bytes], keys: Sequence[Hashable]) -> list[str] | None:
    """The canonical ids (``"*"`` or ``"MS-SEQ"``) of entries going to ``keys``, checked
    as far as possible before sending: one per entry, valid, rising within a partition,
    none after a ``"*"`` of its partition (the store picks that one, so no later id can
    be known to be above it). None if every id is ``"*"``."""
    if isinstance(given, str | bytes):
        raise ValueError("stream_ids must be a list of ids, one per record")
    if len(given) != len(keys):
        raise ValueError(f"{len(given)} stream_ids for {len(keys)} records: give one per record")
    out: list[str] = []
    last: dict[Hashable, tuple[int, int] | None] = {}
    for n, (text, key) in enumerate(zip(given, keys, strict=True), 1):
        parsed = parse_entry_id(text)
        if parsed is None:
            last[key] = None
            out.append("*")
            continue
        if key in last:
            before = last[key]
            if before is None:
                raise ValueError(
                    f"id {n} ({text!r}) follows a '*' of its partition: cannot be known to be "
                    "above the id the store picks"
                )
            if parsed <= before:
                raise ValueError(
                    f"id {n} ({text!r}) is not above {before[0]}-{before[1]}, sent before it "
                    "to the same partition"
                )
        last[key] = parsed
        out.append(f"{parsed[0]}-{parsed[1]}")
    return None if all(i == "*" for i in out) else out


def _primitive_value(name: str, value: Any) -> bytes | int | float:
    """A primitive field as runnel 0.1's Redis client wrote it: ``str(value)`` for bools
    (``True``/``False``), text as UTF-8 (here, so that text no store can hold is refused
    by name); numbers (NaN and the infinities as ``nan``, ``inf``, ``-inf``, which read
    back as such) and bytes go to the transport as they are. Reading takes these and
    ``1``/``0`` (what earlier versions of this one wrote) alike."""
    if value is True:
        return b"True"
    if value is False:
        return b"False"
    if type(value) is str:
        try:
            return value.encode()
        except UnicodeEncodeError:
            raise EncodeError(f"{name}: {problem(value, JSON)}") from None
    return value
