"""Whether a worker process is alive and ready, as ``/healthz`` and ``/readyz`` tell a
platform (docs/operations.md, "Health probes").

Both are answered from state the worker's own loops keep, never by a call to the store
from the HTTP thread, so a probe costs nothing and tells what the loops see:

* live: the event loop ran recently. A task ticks every second; a loop blocked (or a
  process stopped) longer than the ``liveness_timeout`` setting fails the probe.
* ready: not stopping, and every loop that talks to the store heard from it recently:
  the leadership claims (every worker makes them), each processor's heartbeat (and the
  processor is a member of its group), the job executor's heartbeat (and it registered).

Under ``runnel worker --processes N`` each child writes its verdicts to a file in a
directory its supervisor gave it (``RUNNEL_HEALTH_DIR``), every tick; the supervisor
answers for all of them (:mod:`runnel.runtime.supervised_health`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from runnel.exceptions import TransportError

T = TypeVar("T")

HEALTH_DIR = "RUNNEL_HEALTH_DIR"
"""Set by a supervisor serving probes: where its children write their verdicts."""

TICK = 1.0
"""Seconds between the ticks that say the event loop runs."""


@dataclass
class Verdict:
    """A probe's answer: ok, else why not (one short line a reason)."""

    ok: bool
    reasons: list[str] = field(default_factory=list)


class Check:
    """One loop's contact with the store: how long ago it last heard from it, whether its
    last call failed, and whether it holds what it needs (a membership, a registration)."""

    def __init__(self, name: str, window: float, waiting: str) -> None:
        self.name = name
        self.window = window
        """Seconds after which a silence fails the check (a loop stuck on a call)."""
        self.waiting = waiting
        """What the check waits for before its first success ("joining", ...)."""
        self.held = True
        self.ok_at: float | None = None
        self.error: str | None = None

    def ok(self) -> None:
        self.ok_at = time.monotonic()
        self.error = None

    def failed(self, exc: BaseException) -> None:
        self.error = " ".join(f"{type(exc).__name__}: {exc}".split())

    async def watch(self, call: Awaitable[T]) -> T:
        """Await a call to the store, noting whether it answered."""
        try:
            result = await call
        except TransportError as exc:
            self.failed(exc)
            raise
        self.ok()
        return result

    def hold(self, held: bool, waiting: str | None = None) -> None:
        """Whether the loop holds what it needs; ``waiting`` says what it waits for if not."""
        self.held = held
        if waiting is not None:
            self.waiting = waiting

    def reason(self, now: float) -> str | None:
        """Why this check fails now; None if it passes."""
        if self.error is not None:
            return f"{self.name}: the store failed: {self.error}"
        if self.ok_at is None or not self.held:
            return f"{self.name}: {self.waiting}"
        silent = now - self.ok_at
        if silent > self.window:
            return f"{self.name}: no answer from the store for {silent:.0f}s"
        return None


class Health:
    """The verdicts of one worker process, read by the probe server's thread."""

    def __init__(self, liveness_timeout: float) -> None:
        self.liveness_timeout = liveness_timeout
        self.ticked = time.monotonic()
        self.stopping = False
        self.checks: list[Check] = []

    def check(self, name: str, window: float, waiting: str) -> Check:
        found = Check(name, window, waiting)
        self.checks.append(found)
        return found

    def live(self) -> Verdict:
        still = time.monotonic() - self.ticked
        if still > self.liveness_timeout:
            return Verdict(False, [f"the event loop has not run for {still:.0f}s"])
        return Verdict(True)

    def ready(self) -> Verdict:
        if self.stopping:
            return Verdict(False, ["stopping"])
        now = time.monotonic()
        reasons = [r for c in self.checks if (r := c.reason(now)) is not None]
        return Verdict(not reasons, reasons)

    async def tick(self, directory: str | None = None) -> None:
        """Say every second that the loop runs (and, for a supervisor, write the
        verdicts to ``directory``), until cancelled."""
        path = os.path.join(directory, f"{os.getpid()}.json") if directory else None
        try:
            while True:
                self.ticked = time.monotonic()
                if path is not None:
                    self._report(path)
                await asyncio.sleep(TICK)
        finally:
            if path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(path)

    def _report(self, path: str) -> None:
        ready = self.ready()
        body = json.dumps({"ready": ready.ok, "reasons": ready.reasons})
        partial = f"{path}.part"
        try:
            with open(partial, "w") as out:
                out.write(body)
            os.replace(partial, path)  # the supervisor never reads half a file
        except OSError:
            pass  # the supervisor sees the file age, and says so


def reporting_to() -> str | None:
    """The directory this process's supervisor reads its verdicts from, if any."""
    return os.environ.get(HEALTH_DIR) or None
