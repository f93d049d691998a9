"""Application settings: ``App(...)`` keywords, else ``RUNNEL_*`` environment variables."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from datetime import tzinfo
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

from runnel.hashing import default_hasher, named_hasher
from runnel.imports import import_path
from runnel.jobs.queues import QueueSelection
from runnel.options import (
    ProcessorOptions,
    option_defaults,
    option_settings,
    option_types,
    validate_options,
)
from runnel.text import nearest

EMBEDDED_URL = "redis+embedded://"


def zone_of(value: Any) -> tzinfo:
    """The time zone named or given by ``value``: an IANA name, a ``ZoneInfo``, a pytz
    zone (the ``ZoneInfo`` of its name: pytz's own zones only work through
    ``localize``), or any other tzinfo as it is. ``ValueError`` if unknown."""
    if isinstance(value, ZoneInfo):
        return value
    name = getattr(value, "zone", None) if isinstance(value, tzinfo) else value
    if isinstance(name, str):
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {name!r}") from None
    if isinstance(value, tzinfo):
        return value
    raise ValueError(f"a time zone is a name such as 'Europe/London' or a tzinfo, not {value!r}")


PREFIX = "RUNNEL_"


def environment(names: Iterable[str]) -> dict[str, str]:
    """The ``RUNNEL_<NAME>`` variables of these settings, by setting name: the variable's
    name in any case (of two that differ only in case, the later in the environment), its
    value as text for validation to parse. Read here: pydantic-settings, which did only
    this, took 0.04 to 0.06 s of every worker's start to import (docs/performance.md)."""
    wanted = {PREFIX.lower() + name.lower(): name for name in names}
    found: dict[str, str] = {}
    for variable, value in os.environ.items():
        name = wanted.get(variable.lower())
        if name is not None:
            found[name] = value
    return found


LISTED = "runnel settings lists them all"
"""Where a user finds every setting: the command is installed wherever the App is."""

_warned: set[str] = set()


def no_such_settings(
    title: str, unknown: dict[str, Any], names: Iterable[str], others: list[ErrorDetails]
) -> ValidationError:
    """pydantic's ``ValidationError`` (as for any invalid setting): the errors of the
    known settings (``others``), then each unknown keyword named with the setting it most
    likely meant."""
    known = list(names)
    errors: list[InitErrorDetails] = [
        InitErrorDetails(type=e["type"], loc=e["loc"], input=e["input"], ctx=e.get("ctx", {}))
        for e in others
    ]
    for name, value in unknown.items():
        found = nearest(name, known)
        hint = f"; did you mean {found}?" if found else ""
        error = PydanticCustomError(
            "no_such_setting", "no such setting{hint} ({listed})", {"hint": hint, "listed": LISTED}
        )
        errors.append(InitErrorDetails(type=error, loc=(name,), input=value))
    return ValidationError.from_exception_data(title, errors)


def warn_of_near_variables(names: Iterable[str]) -> None:
    """Warn, once per process, of a ``RUNNEL_*`` variable that is no setting's but nearly
    one's (``RUNNEL_PREFETCH_COUNT``): ignored, it would leave the default in force
    unnoticed. Variables far from every setting (``RUNNEL_REDIS_SERVER``, read by the
    embedded server) are someone else's and said nothing of."""
    known = [name.lower() for name in names]
    for variable in os.environ:
        name = variable.lower().removeprefix(PREFIX.lower())
        if name == variable.lower() or name in known or variable in _warned:
            continue
        found = nearest(name, known, cutoff=0.85)
        if found is not None:
            _warned.add(variable)
            logging.getLogger("runnel.settings").warning(
                "%s is not a setting and is ignored; did you mean %s%s? (%s)",
                variable,
                PREFIX,
                found.upper(),
                LISTED,
            )


def keywords(names: Iterable[str], given: dict[str, Any]) -> dict[str, Any]:
    """The keywords with a setting's name in any case (``LOG_LEVEL=``) under its own name,
    as the environment's are; of two that differ only in case, the first given wins.
    Other names are kept as they are, for validation to refuse."""
    lower = {name.lower(): name for name in names}
    found: dict[str, Any] = {}
    for key, value in given.items():
        name = lower.get(key.lower(), key)
        if name not in found:
            found[name] = value
    return found


def _processor_defaults() -> type[BaseModel]:
    """The processor defaults as settings: one per processor option, of the same type,
    bounds and default, named after it (``default_lock_expiry``, ...)."""
    types, defaults = option_types(), option_defaults()
    settings = option_settings()
    return create_model(  # type: ignore[call-overload]
        "_ProcessorDefaults",
        __base__=BaseModel,
        **{settings[o]: (types[o], defaults[o]) for o in types},
    )


if TYPE_CHECKING:
    _ProcessorDefaults = BaseModel
else:
    _ProcessorDefaults = _processor_defaults()


class Settings(_ProcessorDefaults):
    """Every setting; see docs/settings.md for what each one does and its unit."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    def __init__(self, **given: Any) -> None:
        # Keywords win over the environment; both are validated alike, as one input.
        names = type(self).model_fields
        chosen = keywords(names, given)
        unknown = {name: chosen.pop(name) for name in list(chosen) if name not in names}
        warn_of_near_variables(names)
        try:
            super().__init__(**{**environment(names), **chosen})
        except ValidationError as exc:
            if not unknown:
                raise
            raise no_such_settings(type(self).__name__, unknown, names, exc.errors()) from None
        if unknown:
            raise no_such_settings(type(self).__name__, unknown, names, [])

    redis_url: str = EMBEDDED_URL
    redis_key_layout: Literal["classic", "cluster"] | None = None
    """Which key names the store uses; None: the URL's scheme decides (``redis+cluster://``:
    the cluster layout, else the 0.1 one). docs/cluster.md."""
    redis_max_connections: int = Field(100, gt=0)
    """Connections a process's client keeps to each Redis server (each master of a
    cluster); a call made while all are busy waits for one."""
    wait_replicas: int = Field(0, ge=0)
    """Replicas that must hold a send (and a job enqueue) before it returns; 0: no waiting."""
    wait_timeout: float = Field(1.0, gt=0, description="seconds")
    log_format: Literal["console", "json"] = "console"
    log_level: str = "info"
    autodiscover: str | None = None
    timezone: Any = "UTC"
    """An IANA name (``"Europe/London"``) or a tzinfo: a pytz zone (as runnel 0.1 took)
    becomes its name; a fixed offset (``datetime.timezone``) is kept as it is."""
    leadership_poll_interval: int = Field(4000, gt=0, description="milliseconds")
    testing: bool = False
    gc_freeze: bool = Field(True, description="see runnel.runtime.worker.frozen_heap")
    metrics_port: int | None = Field(None, ge=1, le=65535, description="None: no metrics")
    metrics_host: str = "0.0.0.0"
    health_port: int | None = Field(None, ge=1, le=65535, description="None: on metrics_port")
    """A port serving only ``/healthz`` and ``/readyz``; the metrics port serves them too."""
    health_host: str = "0.0.0.0"
    liveness_timeout: float = Field(30.0, gt=0, description="seconds")
    """How long a worker's event loop may not run before ``/healthz`` fails."""

    # Stream defaults.
    default_partition_count: int = Field(16, gt=0)
    default_partition_size: int = Field(50_000, gt=0)
    default_on_full: Literal["wait", "drop_oldest"] = "wait"
    """What a send does to a partition at its size whose oldest entries a processor has
    not acknowledged: wait for room (then PartitionFull), or drop them (counted as lost)."""
    full_timeout: float = Field(30.0, ge=0, description="seconds")
    """How long a send waits for room in a full partition before PartitionFull."""
    default_idempotence_window: float = Field(3600, gt=0.001, description="seconds")
    """How long a partition remembers the identity of an append (a send's call, a
    record's key, a numbered producer): docs/guide.md, "Sending each record once"."""
    default_idempotence_keys: int = Field(10_000, ge=2)
    """The most call identities and keys one partition remembers at once."""
    idempotent_sends: bool = True
    """Each send, and each enqueue of jobs or a workflow, carries its call's identity,
    and one whose reply was lost is sent again (``send_retries``) without being stored
    twice."""
    send_retries: int = Field(3, ge=0)
    """How often a send or enqueue whose reply was lost is sent again
    (``idempotent_sends``)."""
    default_serializer: Any = "json"
    default_hasher: Any = default_hasher

    # Processor defaults: default_exception_policy, default_lock_expiry, ... come from
    # runnel.processor.ProcessorOptions (see _ProcessorDefaults above).

    # Tables (docs/state.md).
    table_cache_size: int = Field(100_000, gt=0)
    """Values a worker keeps decoded per table (and processor), shared equally by the
    partitions it owns; more are evicted, least recently used first, once committed."""

    # The job queue (docs/jobs.md).
    default_retries: int = Field(3, ge=0)
    results_enabled: bool = True
    results_ttl: float = Field(3600, gt=0, description="seconds")
    job_concurrency: int = Field(8, gt=0)
    job_backoff_base: float = Field(0.5, gt=0, description="seconds")
    job_backoff_cap: float = Field(600, gt=0, description="seconds")
    job_heartbeat_timeout: float = Field(30, gt=0, description="seconds")
    job_schedule_interval: float = Field(0.25, gt=0, description="seconds")
    job_cron_grace: float = Field(60, gt=0, description="seconds")
    """How late a periodic job's tick may be enqueued and still count as on time."""
    job_queues: str | None = None
    """The queues a worker takes jobs from, as ``runnel worker --queues`` takes them
    (``critical,default`` or ``critical=5,default=1``); None: every queue the app's jobs
    declare, with equal weights."""

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        value = value.lower()
        if value not in {"debug", "info", "warning", "error", "critical"}:
            raise ValueError("must be one of debug, info, warning, error, critical")
        return value

    @field_validator("job_queues")
    @classmethod
    def _queues(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return str(QueueSelection.parse(value))

    @field_validator("timezone", mode="before")
    @classmethod
    def _zone(cls, value: Any) -> str | tzinfo:
        try:
            zone = zone_of(value)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        return zone.key if isinstance(zone, ZoneInfo) else zone

    @field_validator("default_hasher")
    @classmethod
    def _hasher(cls, value: Any) -> Callable[[Any], int]:
        if isinstance(value, str):
            try:
                # A hasher's name ("md5", "xxhash"), else MODULE:NAME (or 0.1's MODULE.NAME).
                found = named_hasher(value) if ":" not in value else None
                value = found if found is not None else import_path(value)
            except Exception as exc:  # pydantic reports only ValueErrors as validation errors
                raise ValueError(str(exc)) from None
        if not callable(value):
            raise ValueError("must be a callable, a hasher's name (md5, xxhash) or MODULE:NAME")
        return value

    if TYPE_CHECKING:  # the processor defaults, made from ProcessorOptions

        def __getattr__(self, name: str) -> Any: ...

    def processor_options(self, **overrides: Any) -> ProcessorOptions:
        """A processor's options: these settings' defaults with ``overrides`` (by option
        name); raises pydantic's ``ValidationError`` if a value is invalid."""
        defaults = {o: getattr(self, s) for o, s in option_settings().items()}
        return validate_options({**defaults, **overrides})

    @property
    def tz(self) -> tzinfo:
        return zone_of(self.timezone)
