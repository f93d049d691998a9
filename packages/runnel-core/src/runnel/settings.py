"""Application settings: ``App(...)`` keywords, else ``RUNNEL_*`` environment variables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from runnel.hashing import default_hasher
from runnel.imports import import_object
from runnel.types import ExceptionPolicy

EMBEDDED_URL = "redis+embedded://"


class Settings(BaseSettings):
    """Every setting; see docs/settings.md for what each one does and its unit."""

    model_config = SettingsConfigDict(
        env_prefix="RUNNEL_", case_sensitive=False, extra="forbid", validate_default=True
    )

    redis_url: str = EMBEDDED_URL
    log_format: Literal["console", "json"] = "console"
    log_level: str = "info"
    autodiscover: str | None = None
    timezone: str = "UTC"
    leadership_poll_interval: int = Field(4000, gt=0, description="milliseconds")
    testing: bool = False
    gc_freeze: bool = Field(True, description="see runnel.processing.worker.frozen_heap")
    metrics_port: int | None = Field(None, ge=1, le=65535, description="None: no metrics")
    metrics_host: str = "0.0.0.0"

    # Stream defaults.
    default_partition_count: int = Field(16, gt=0)
    default_partition_size: int = Field(50_000, gt=0)
    default_serializer: Any = "json"
    default_hasher: Any = default_hasher

    # Processor defaults.
    default_exception_policy: ExceptionPolicy = ExceptionPolicy.HALT
    default_lock_expiry: float = Field(30, gt=0, description="seconds")
    default_read_timeout: int = Field(500, gt=0, description="milliseconds")
    default_prefetch_count: int = Field(8, gt=0)
    default_assignment_attempts: int = Field(32, gt=0)
    default_assignment_sleep: float = Field(2, ge=0, description="seconds")
    default_grace_period: float = Field(8, ge=0, description="seconds")
    default_pool_size: int = Field(16, gt=0)
    default_join_delay: float = Field(2, ge=0, description="seconds")
    # ExceptionPolicy.RETRY (processor options retries=, retry_backoff=, ..., fallback=).
    default_event_retries: int = Field(3, ge=0)
    default_retry_backoff: float = Field(0.5, gt=0, description="seconds")
    default_retry_backoff_cap: float = Field(30, gt=0, description="seconds")
    default_retry_jitter: float = Field(0, ge=0, le=1)
    default_retry_fallback: ExceptionPolicy = ExceptionPolicy.HALT

    # The job queue (docs/jobs.md).
    default_retries: int = Field(3, ge=0)
    results_enabled: bool = True
    results_ttl: float = Field(3600, gt=0, description="seconds")
    job_concurrency: int = Field(8, gt=0)
    job_backoff_base: float = Field(0.5, gt=0, description="seconds")
    job_backoff_cap: float = Field(600, gt=0, description="seconds")
    job_heartbeat_timeout: float = Field(30, gt=0, description="seconds")
    job_schedule_interval: float = Field(0.25, gt=0, description="seconds")

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        value = value.lower()
        if value not in {"debug", "info", "warning", "error", "critical"}:
            raise ValueError("must be one of debug, info, warning, error, critical")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}") from None
        return value

    @field_validator("default_exception_policy", "default_retry_fallback", mode="before")
    @classmethod
    def _policy(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("default_retry_fallback")
    @classmethod
    def _fallback(cls, value: ExceptionPolicy) -> ExceptionPolicy:
        if value is ExceptionPolicy.RETRY:
            raise ValueError("must be halt, quarantine or ignore (what to do once retries run out)")
        return value

    @field_validator("default_hasher")
    @classmethod
    def _hasher(cls, value: Any) -> Callable[[Any], int]:
        if isinstance(value, str):
            try:
                value = import_object(value)
            except Exception as exc:  # pydantic reports only ValueErrors as validation errors
                raise ValueError(str(exc)) from None
        if not callable(value):
            raise ValueError("must be a callable or a MODULE:NAME naming one")
        return value

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)
