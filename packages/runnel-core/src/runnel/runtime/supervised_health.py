"""The probes of ``runnel worker --processes N``: the supervisor answers for its children.

Each child writes its readiness to ``<pid>.json`` in a directory the supervisor made, once
a second from its event loop (:meth:`runnel.runtime.health.Health.tick`), so the file's
age is how long ago that loop last ran. The supervisor is

* live while every slot has a child running whose file is younger than
  ``liveness_timeout`` (a child that has not written yet gets that long from its start);
  a slot whose child died and waits for its restart fails it, as a child wedged does
  (not while stopping: the children exit then, as asked);
* ready while it is not stopping and every child is running and says it is ready.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from runnel.runtime.health import HEALTH_DIR, Verdict

if TYPE_CHECKING:
    from runnel.runtime.supervisor import Slot, Supervisor


class SupervisedHealth:
    """The supervisor's verdicts, from its slots and its children's files."""

    def __init__(self, supervisor: Supervisor, directory: str, liveness_timeout: float) -> None:
        self.supervisor = supervisor
        self.directory = directory
        self.liveness_timeout = liveness_timeout

    @property
    def env(self) -> dict[str, str]:
        """What the children need to report."""
        return {HEALTH_DIR: self.directory}

    def forget(self, pid: int) -> None:
        """A child exited: its file (if it could not remove it) means nothing now."""
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.directory, f"{pid}.json"))

    def live(self) -> Verdict:
        reasons = []
        stopping = self.supervisor.stopping
        for slot, pid in self._children():
            if pid is None:
                if not stopping:  # stopping, children exit as they were asked to
                    reasons.append(f"process {slot.number}: exited; waiting to restart it")
                continue
            silent = self._silent(slot, pid)
            if silent is not None and silent > self.liveness_timeout:
                reasons.append(
                    f"process {slot.number} (pid {pid}): its event loop has not run "
                    f"for {silent:.0f}s"
                )
        return Verdict(not reasons, reasons)

    def ready(self) -> Verdict:
        if self.supervisor.stopping:
            return Verdict(False, ["stopping"])
        reasons = []
        for slot, pid in self._children():
            where = f"process {slot.number}" + (f" (pid {pid})" if pid is not None else "")
            if pid is None:
                reasons.append(f"{where}: exited; waiting to restart it")
                continue
            silent = self._silent(slot, pid)
            if silent is None:
                reasons.append(f"{where}: starting")
                continue
            if silent > self.liveness_timeout:
                reasons.append(f"{where}: its event loop has not run for {silent:.0f}s")
                continue
            said = self._read(pid)
            if said is None:
                reasons.append(f"{where}: starting")
            elif not said.get("ready"):
                told = said.get("reasons")
                why = [str(r) for r in told] if isinstance(told, list) and told else ["not ready"]
                reasons += [f"{where}: {r}" for r in why]
        return Verdict(not reasons, reasons)

    def _children(self) -> Iterator[tuple[Slot, int | None]]:
        for slot in self.supervisor.slots:
            process = slot.process  # read once: the supervisor's thread may clear it
            running = process is not None and process.returncode is None
            yield slot, (process.pid if running and process is not None else None)

    def _silent(self, slot: Slot, pid: int) -> float | None:
        """Seconds since the child's loop last wrote; since its start if it never did
        (None: it has not written yet, and is still within its time to start)."""
        try:
            written = os.stat(os.path.join(self.directory, f"{pid}.json")).st_mtime
        except OSError:
            started = time.monotonic() - slot.started
            return started if started > self.liveness_timeout else None
        return max(0.0, time.time() - written)

    def _read(self, pid: int) -> dict[str, object] | None:
        try:
            with open(os.path.join(self.directory, f"{pid}.json")) as found:
                said = json.load(found)
        except (OSError, ValueError):
            return None
        return said if isinstance(said, dict) else None


@contextlib.contextmanager
def health_directory() -> Iterator[str]:
    """A fresh directory for the children's verdicts, removed on the way out."""
    directory = tempfile.mkdtemp(prefix="runnel-health-")
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
