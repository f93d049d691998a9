"""`runnel sendmany` on large inputs: its memory does not grow with the input (validated in
a first reading that keeps no record, then read again and sent chunk by chunk), progress
is shown on a terminal while it validates, Ctrl-C then says that nothing was sent, and
line numbers and blank lines count as they did when the input was read whole."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import time

from tests.support.cli_app import MODULE, Project, jsonl, pings
from tests.support.processes import RUNNEL, wait_for

STREAM = f"{MODULE}:pings"
BAD = '{"key": "k0"}\n'
BAD_SAYS = "line {n}: invalid Ping: n: missing"


PEAK = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""
"""Runs a command and writes its peak resident memory (KiB): from a small process of its
own, since a child forked from pytest starts its peak at pytest's size."""


def peak_rss(project: Project, *args: str, stdin: int | None = None) -> tuple[int, int, str]:
    """Run `runnel` and return its exit code, its peak resident memory (KiB) and stderr."""
    peak = project.dir / f"peak-{time.monotonic_ns()}"
    done = subprocess.run(
        [sys.executable, "-c", PEAK, str(peak), *RUNNEL, *args],
        cwd=project.dir,
        env=project.env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, int(peak.read_text()), done.stderr


def test_memory_does_not_grow_with_the_input(project: Project) -> None:
    """200,000 lines take about the memory of 2,000, whether a bad last line stops them
    after validating or they are all sent. Held whole, 200,000 records took ~300 MB."""
    for name, count in (("small", 2_000), ("large", 200_000)):
        text = jsonl(pings(count, keys=7))
        (project.dir / f"{name}.jsonl").write_text(text)
        (project.dir / f"{name}-bad.jsonl").write_text(text + BAD)

    code, small, err = peak_rss(project, "sendmany", STREAM, "small-bad.jsonl")
    assert (code, err) == (1, f"Error: {BAD_SAYS.format(n=2_001)}\n")
    code, large, err = peak_rss(project, "sendmany", STREAM, "large-bad.jsonl")
    assert (code, err) == (1, f"Error: {BAD_SAYS.format(n=200_001)}\n")
    assert project.stream_length() == 0
    assert large - small < 40_000, (small, large)

    code, small, err = peak_rss(project, "sendmany", STREAM, "small.jsonl")
    assert (code, err) == (0, "sent 2000 events to pings\n")
    with open(project.dir / "large.jsonl", "rb") as given:  # standard input: kept on disk
        code, large, err = peak_rss(project, "sendmany", STREAM, "-", stdin=given.fileno())
    assert (code, err) == (0, "sent 200000 events to pings\n")
    assert large - small < 40_000, (small, large)


class OnTerminal:
    """`runnel sendmany ... -` with stderr on a terminal and stdin a pipe the test feeds."""

    def __init__(self, project: Project) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [*RUNNEL, "sendmany", STREAM, "-"],
            cwd=project.dir,
            env=project.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=slave,
        )
        os.close(slave)
        self.shown = b""

    def read(self) -> bytes:
        """What the terminal got so far (without blocking for long)."""
        import select

        while select.select([self.master], [], [], 0.05)[0]:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # the process closed the terminal
                break
            if not data:
                break
            self.shown += data
        return self.shown

    def finish(self) -> tuple[int, bytes, bytes]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        code = self.proc.wait(120)
        out = self.proc.stdout.read()
        self.read()
        os.close(self.master)
        return code, out, self.shown


def test_progress_is_shown_on_a_terminal_while_validating(project: Project) -> None:
    """From 10,000 lines on, one line redrawn on stderr, erased before what follows;
    stdout stays empty."""
    term = OnTerminal(project)
    assert term.proc.stdin is not None
    term.proc.stdin.write((jsonl(pings(12_000, keys=7)) + BAD).encode())
    code, out, shown = term.finish()
    assert (code, out) == (1, b"")
    assert b"\rvalidating: line 10000" in shown and b"\rvalidating: line 12000" in shown
    assert b"line 9000" not in shown
    assert shown.endswith(b"\r\x1b[K" + f"Error: {BAD_SAYS.format(n=12_001)}\r\n".encode())
    assert project.stream_length() == 0


def test_ctrl_c_while_validating_says_nothing_was_sent(project: Project) -> None:
    term = OnTerminal(project)
    assert term.proc.stdin is not None
    term.proc.stdin.write(jsonl(pings(11_000, keys=7)).encode())
    term.proc.stdin.flush()  # and kept open: still validating, waiting for more
    wait_for(lambda: b"validating: line 11000" in term.read())
    term.proc.send_signal(signal.SIGINT)
    code, out, shown = term.finish()
    assert (code, out) == (1, b"")
    assert shown.endswith(
        b"\r\x1b[KError: interrupted while validating, after 11000 lines: nothing was sent\r\n"
    )
    assert project.stream_length() == 0


def test_lines_count_as_when_the_input_was_read_whole(project: Project) -> None:
    r"""Lines end with \n, \r\n or a lone \r (as bytes.splitlines reads them), a blank line
    counts, and a line may cross the blocks the input is read in (1 MiB): from a file, a
    pipe (a named one too) or standard input, the same line is named."""
    events = pings(30_000, keys=7)  # about 1.5 MiB
    endings = ["\n", "\r\n", "\r"]
    text = "".join(f"{line}{endings[i % 3]}" for i, line in enumerate(jsonl(events).split("\n")))
    text = text.rstrip("\r\n") + "\r\n\r\n" + BAD  # a blank line, then line 30,002: bad
    (project.dir / "mixed.jsonl").write_text(text, newline="")
    fifo = project.dir / "mixed.fifo"
    os.mkfifo(fifo)
    said = f"Error: {BAD_SAYS.format(n=30_002)}\n"

    done = project.run("sendmany", STREAM, "mixed.jsonl")
    assert (done.returncode, done.stderr) == (1, said)
    done = project.run("sendmany", STREAM, "-", input=text)
    assert (done.returncode, done.stderr) == (1, said)
    writer = subprocess.Popen(["cp", "mixed.jsonl", str(fifo)], cwd=project.dir)
    done = project.run("sendmany", STREAM, str(fifo))
    assert writer.wait(60) == 0
    assert (done.returncode, done.stderr) == (1, said)
    assert project.stream_length() == 0

    good = text[: -len(BAD)]
    (project.dir / "good.jsonl").write_text(good, newline="")
    writer = subprocess.Popen(["cp", "good.jsonl", str(fifo)], cwd=project.dir)
    done = project.run("sendmany", STREAM, str(fifo))
    assert writer.wait(60) == 0
    assert (done.returncode, done.stderr) == (0, "sent 30000 events to pings\n")
    assert project.stream_length() == 30_000
