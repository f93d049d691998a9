"""``runnel worker --processes N``: run N worker processes and keep them running.

Each child is an ordinary ``runnel worker`` (the same command line without
``--processes``): the processors' partitions are shared among the children by the usual
rebalance, and the children compete for jobs, so every core can work. The supervisor
does no work of its own:

    start N children
    until told to stop:
        a child exited, not asked to -> log how, restart it after a backoff
                                        (1 s doubling to 30 s; reset once one ran a minute)
        a child exited REFUSED       -> Redis refused its credentials or a command: a
                                        restart would be refused too, so stop them all
                                        and exit REFUSED
    SIGTERM / SIGINT  -> forward SIGTERM once to every child, wait for all of them;
                         exit 0 if each stopped cleanly, else 1
    a second signal   -> forward it again (a child then stops at once), exit 1

Children run in their own session, so a terminal's Ctrl-C reaches only the supervisor
(which forwards one SIGTERM) rather than every process twice; on Linux each child also
gets SIGTERM if the supervisor itself dies, so none is left behind.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType

log = logging.getLogger("runnel.supervisor")

FIRST_DELAY = 1.0
MAX_DELAY = 30.0
HEALTHY_AFTER = 60.0
"""A child that ran this long before it exited is restarted after the first delay again
(its backoff starts over)."""
POLL = 0.1
REFUSED = 3
"""The exit code of a worker that the store refused (credentials, permissions)."""


@dataclass
class Slot:
    """One of the N places a child process runs in."""

    number: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    delay: float = FIRST_DELAY
    restart_at: float | None = None
    exits: list[int] = field(default_factory=list)


class Supervisor:
    def __init__(
        self,
        command: Sequence[str],
        processes: int,
        env: dict[str, str] | None = None,
        child_exited: Callable[[int], None] | None = None,
    ) -> None:
        self.command = list(command)
        self.slots = [Slot(n) for n in range(1, processes + 1)]
        self.env = env
        self.child_exited = child_exited
        """Called with the pid of each child that exited (metrics forget its gauges)."""
        self._signals = 0
        self._refused = False
        self._wake = threading.Event()

    @property
    def stopping(self) -> bool:
        """Whether a signal told the supervisor to stop its children."""
        return self._signals > 0

    def run(self) -> int:
        """Supervise until stopped; the exit code for the ``runnel worker`` command."""
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            log.info("supervising %d worker processes", len(self.slots))
            for slot in self.slots:
                self._start(slot)
            while not self._signals and not self._refused:
                self._check()
                self._wake.wait(POLL)
            code = self._stop()
            return REFUSED if self._refused else code
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _start(self, slot: Slot) -> None:
        slot.process = subprocess.Popen(
            self.command,
            env={**(self.env or os.environ), "RUNNEL_WORKER_SLOT": str(slot.number)},
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        slot.started = time.monotonic()
        slot.restart_at = None
        log.info("worker process %d started (pid %d)", slot.number, slot.process.pid)

    def _check(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if slot.process is None:
                if slot.restart_at is not None and now >= slot.restart_at:
                    self._start(slot)
                continue
            code = slot.process.poll()
            if code is None:
                continue
            ran = now - slot.started
            pid = slot.process.pid
            slot.exits.append(code)
            if self.child_exited is not None:
                self.child_exited(pid)
            slot.process = None
            if code == REFUSED:
                log.error(
                    "worker process %d was refused by the store (see its error); "
                    "restarting would not help: stopping",
                    slot.number,
                )
                self._refused = True
                return
            if ran >= HEALTHY_AFTER:
                slot.delay = FIRST_DELAY
            log.warning(
                "worker process %d (pid %d) %s after %.1fs; restarting it in %.1fs",
                slot.number,
                pid,
                _how(code),
                ran,
                slot.delay,
            )
            slot.restart_at = now + slot.delay
            slot.delay = min(slot.delay * 2, MAX_DELAY)

    def _stop(self) -> int:
        running = [s for s in self.slots if s.process is not None]
        log.info("stopping %d worker processes", len(running))
        self._forward(signal.SIGTERM)
        forwarded = 1
        codes = []
        for slot in running:
            assert slot.process is not None
            while True:
                if self._signals > forwarded:
                    forwarded = self._signals
                    log.warning("signalled again: stopping the worker processes at once")
                    self._forward(signal.SIGTERM)
                try:
                    codes.append(slot.process.wait(POLL))
                    break
                except subprocess.TimeoutExpired:
                    continue
            log.info(
                "worker process %d (pid %d) %s", slot.number, slot.process.pid, _how(codes[-1])
            )
        if forwarded > 1:
            return 1
        # Killed by the SIGTERM we sent: a child still starting up (its handlers not yet
        # installed), which had taken no work, so that is a clean stop too.
        return 0 if all(code in (0, -signal.SIGTERM) for code in codes) else 1

    def _forward(self, sig: signal.Signals) -> None:
        for slot in self.slots:
            if slot.process is not None and slot.process.poll() is None:
                try:
                    slot.process.send_signal(sig)
                except ProcessLookupError:
                    pass

    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        self._signals += 1
        self._wake.set()


def _how(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux for SIGTERM when the supervisor dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass
