"""What redis-server spent on a measured window: its CPU (``INFO cpu``) and its per-command
counts and times (``INFO commandstats``), taken before and after, so that Runnel's cost
on the server can be set per event beside the plain loop's.

``INFO commandstats`` times a command from its start to its end, including what it runs
inside: EXEC's time includes the commands queued in its MULTI, EVALSHA's the commands the
script calls (which are also counted under their own names). Those nested ones are shown,
indented, but left out of the total, which is then what the server spent running commands;
``INFO cpu`` is everything (reading, parsing and writing replies too). Command times are
wall-clock: on a machine busier than its cores, a server descheduled mid-command makes
them exceed ``INFO cpu``; their shares still tell where the time goes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis

HARNESS = ("xinfo", "info", "config", "client", "ping", "mget", "xlen", "hello", "select")
"""The harness's own polling (benchmarks/harness.py) and connection set-up: not the sides'."""
SCRIPTS = ("evalsha", "eval", "fcall", "evalsha_ro", "eval_ro", "fcall_ro")
SCRIPTED = ("get", "xack", "pttl", "pexpire", "set", "del")
"""What Runnel's read and acknowledgement scripts call (lua/check_locks.lua,
lua/fenced_ack_many.lua): inside a script's time whenever scripts ran (the plain loop runs
none, and sends its XACKs itself)."""
QUEUED = ("xreadgroup",)
"""Runnel queues XREADGROUP in MULTI/EXEC (its fenced read): inside EXEC when EXEC ran."""
ORDER = ("watch", "multi", "exec", "xreadgroup", "eval", "evalsha", "get", "xack")


@dataclass
class Snapshot:
    cpu: float  # seconds of CPU, user + system
    commands: dict[str, tuple[int, int]] = field(default_factory=dict)  # name: (calls, usec)


def snapshot(url: str) -> Snapshot:
    client = redis.Redis.from_url(url)
    try:
        cpu = client.info("cpu")
        stats = client.info("commandstats")
    finally:
        client.close()
    commands = {
        name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
        for name, v in stats.items()
    }
    return Snapshot(float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]), commands)


@dataclass
class Window:
    """What the server did between two snapshots."""

    cpu: float
    commands: dict[str, tuple[int, int]]

    def nested(self, name: str) -> bool:
        """Whether ``name``'s time is already inside another command's (EXEC or a script)."""
        if name in QUEUED and self.calls("exec"):
            return True
        return name in SCRIPTED and any(self.calls(s) for s in SCRIPTS)

    def calls(self, name: str) -> int:
        return self.commands.get(name, (0, 0))[0]

    def top_usec(self) -> int:
        """Microseconds spent running the sides' commands, each counted once."""
        return sum(u for name, (_, u) in self.commands.items() if not self.nested(name))


def between(before: Snapshot, after: Snapshot) -> Window:
    commands = {}
    for name, (calls, usec) in after.commands.items():
        was = before.commands.get(name, (0, 0))
        if calls > was[0] and not name.startswith(HARNESS):
            commands[name] = (calls - was[0], usec - was[1])
    return Window(after.cpu - before.cpu, commands)


def per_event(window: Window, events: int) -> dict[str, float]:
    """Microseconds of server CPU and of command time per event; events per read."""
    reads = window.calls("exec") or window.calls("xreadgroup")
    return {
        "cpu_us": window.cpu * 1e6 / events,
        "commands_us": window.top_usec() / events,
        "events_per_read": events / reads if reads else 0.0,
    }


def breakdown(window: Window, events: int) -> list[dict[str, Any]]:
    """One row a command: calls per read, usec a call, usec per read and per event (reads:
    EXECs for Runnel, XREADGROUPs for the plain loop)."""
    reads = window.calls("exec") or window.calls("xreadgroup") or 1
    names = sorted(
        window.commands,
        key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n),
    )
    rows = []
    for name in names:
        calls, usec = window.commands[name]
        rows.append(
            {
                "command": name.upper(),
                "nested": window.nested(name),
                "per_read": calls / reads,
                "usec_per_call": usec / calls,
                "usec_per_read": usec / reads,
                "usec_per_event": usec / events,
            }
        )
    return rows


def breakdown_table(title: str, window: Window, events: int) -> str:
    """:func:`breakdown` as text; nested commands indented (their time is in the total of
    EXEC or the script above them)."""
    head = ("command", "calls/read", "us/call", "us/read", "us/event")
    cells = [
        (
            ("  " if r["nested"] else "") + r["command"],
            f"{r['per_read']:.2f}",
            f"{r['usec_per_call']:.2f}",
            f"{r['usec_per_read']:.1f}",
            f"{r['usec_per_event']:.3f}",
        )
        for r in breakdown(window, events)
    ]
    e = per_event(window, events)
    cells.append(("total, commands", "", "", "", f"{e['commands_us']:.3f}"))
    cells.append(("total, INFO cpu", "", "", "", f"{e['cpu_us']:.3f}"))
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head))]
    lines = [title]
    for c in [head, *cells]:
        right = (v.rjust(w) for v, w in zip(c[1:], widths[1:], strict=True))
        lines.append("  ".join([c[0].ljust(widths[0]), *right]))
    return "\n".join(lines)
