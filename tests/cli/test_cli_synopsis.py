"""Every command line the docs show exists: its sub-command path and each of its flags
are in the real `runnel ... --help`.

The lines come from the public contract (API.md's code blocks, copied below, since that
file lives outside the repository) and from every code block of docs/*.md and README.md
(read from the repository). docs/cli.md's synopsis must also name every command.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Iterator
from itertools import takewhile
from pathlib import Path

import pytest

from tests.support.processes import RUNNEL

ROOT = Path(__file__).parents[2]

API_SYNOPSIS = """
runnel worker MODULE:APP [--processors a,b] [--plugin MODULE ...]
runnel send MODULE:STREAM '{"order_id": 1, ...}'
runnel sendmany MODULE:STREAM FILE.jsonl        # FILE may be - for stdin
runnel processor reset MODULE:PROCESSOR [--start 0]
runnel worker MODULE:APP [--processes N] [--concurrency N]   # streams and jobs
runnel jobs info MODULE:APP [--json]
runnel jobs show MODULE:APP JOB_ID [--json]
runnel jobs dead list|replay|purge MODULE:APP [--job NAME] [--id ID] [--yes]
runnel jobs send MODULE:JOBNAME 'ARGS_JSON_ARRAY' ['KWARGS_JSON_OBJECT']
runnel worker MODULE:APP --metrics-port 9100        # Prometheus /metrics (runnel_* names)
runnel dashboard MODULE:APP [--port 8000] [--host 127.0.0.1] [--allow-actions]
runnel processor skip MODULE:PROCESSOR --partition N --id ENTRY_ID
runnel processor resume MODULE:PROCESSOR [--partition N]
runnel dead list|replay|purge MODULE:STREAM [--yes]  # a DeadLetterMiddleware sink
runnel table list MODULE:APP
runnel table get MODULE:TABLE KEY [--json]
runnel table dump MODULE:TABLE [--partition N] [--json]
runnel worker MODULE:APP --queues critical,default     # strict priority order
runnel jobs cancel MODULE:APP JOB_ID
runnel acl MODULE:APP                                   # the ACL SETUSER rules this app needs
"""
"""The ``runnel`` lines of API.md's code blocks, as written there."""

NOT_BUILT_YET: dict[tuple[str, ...], str | None] = {}
"""Commands (None) and flags that API.md promises for later work. Each must still be
missing: once it lands, this test fails until it is taken off this list."""

IN_OTHER_DOCS = {"avro", "spark", "example-hello"}
"""Commands that docs/cli.md leaves to other pages: runnel-avro's (codecs.md),
runnel-spark's (spark.md), and the test suite's example plugin (plugins.md)."""


@functools.cache
def help_of(path: tuple[str, ...]) -> str | None:
    """``runnel PATH --help``, or None if there is no such command."""
    done = subprocess.run(
        [*RUNNEL, *path, "--help"],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "100"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode == 2 and "No such command" in done.stderr:
        return None
    assert done.returncode == 0, (path, done.stderr)
    return done.stdout


def _section(text: str, title: str) -> list[str]:
    """The lines of a help section (``Options:``, ``Commands:``)."""
    lines = text.split(f"\n{title}\n", 1)[1].split("\n\n", 1)[0] if title in text else ""
    return lines.splitlines()


def commands_of(path: tuple[str, ...]) -> set[str]:
    text = help_of(path) or ""
    return {line.split()[0] for line in _section(text, "Commands:") if line[2:3] != " "}


def flags_of(path: tuple[str, ...]) -> set[str]:
    """The long flags in the names column of the help's options."""
    found: set[str] = set()
    for line in _section(help_of(path) or "", "Options:"):
        if line.startswith("  -"):
            found.update(re.findall(r"--[a-z][a-z0-9-]*", re.split(r"\s{2,}", line.strip())[0]))
    return found


def resolve(words: list[str]) -> tuple[list[tuple[str, ...]], list[str]]:
    """The command paths the leading words name (``list|replay|purge`` names three), and
    the words left (arguments and options)."""
    paths: list[tuple[str, ...]] = [()]
    for index, word in enumerate(words):
        names = word.split("|")
        if not all(name in commands_of(paths[0]) for name in names):
            return paths, words[index:]
        paths = [(*path, name) for path in paths for name in names]
    return paths, []


def runnel_lines(text: str) -> Iterator[str]:
    """The ``runnel`` lines of a Markdown text's code blocks, continuation lines joined,
    prompts, environment variables, quoted arguments and comments taken off."""
    in_block = False
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.strip().startswith("```"):
            in_block = not in_block
            continue
        command = re.sub(r"^(\$ )?([A-Z_]+=\S+ )*", "", line.strip())
        if not in_block or not command.startswith("runnel "):
            continue
        indent = len(line) - len(line.lstrip())
        for more in lines[index + 1 :]:
            if command.endswith("\\"):
                command = command[:-1] + more.strip()
            elif len(more) - len(more.lstrip()) > indent and more.strip()[:1] in ("[", "-"):
                command += " " + more.strip()
            else:
                break
        command = re.sub(r"'[^']*'", "ARG", command)
        yield re.sub(r"\s+#\s.*$", "", command)


def doc_lines() -> list[tuple[str, str]]:
    files = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    return [(f.name, line) for f in files for line in runnel_lines(f.read_text())]


def check(line: str) -> list[str]:
    """What the line shows that ``--help`` does not have (NOT_BUILT_YET aside)."""
    words = line.replace("[", " ").replace("]", " ").split()[1:]
    paths, rest = resolve(words)
    flags = re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", " ".join(rest))
    wrong = []
    for path in paths:
        if not path or commands_of(path):  # it stopped at a group: no such command
            named = (*path, *takewhile(lambda w: re.fullmatch(r"[a-z][a-z-]*", w), rest))
            if any(NOT_BUILT_YET.get(named[:n], "") is None for n in range(1, len(named) + 1)):
                continue
            if named == path:
                wrong.append(f"runnel {' '.join(path)} is a group: it needs a command")
            else:
                wrong.append(f"runnel {' '.join(named)}: no such command")
            continue
        for flag in flags:
            if flag not in flags_of(path) and NOT_BUILT_YET.get(path) != flag:
                wrong.append(f"runnel {' '.join(path)} has no {flag}")
    return wrong


def test_the_check_finds_what_help_lacks() -> None:
    """The checks below would pass on a parser that saw nothing: it sees these."""
    lines = list(runnel_lines("```\n$ runnel worker X [--a]\n         [--b]  # c\n```\n"))
    assert lines == ["runnel worker X [--a] [--b]"]
    assert check("runnel worker MODULE:APP [--processes N] [--nope]") == [
        "runnel worker has no --nope"
    ]
    assert check("runnel dead list|purge MODULE:STREAM --nope") == [
        "runnel dead list has no --nope",
        "runnel dead purge has no --nope",
    ]
    assert check("runnel jobs nope MODULE:APP") == ["runnel jobs nope: no such command"]
    assert check("runnel jobs dead MODULE:APP") == [
        "runnel jobs dead is a group: it needs a command"
    ]


@pytest.mark.parametrize("line", API_SYNOPSIS.strip().splitlines())
def test_api_synopsis_line_exists(line: str) -> None:
    assert check(re.sub(r"'[^']*'", "ARG", line)) == []


@pytest.mark.parametrize("where,line", doc_lines(), ids=lambda x: x[:60])
def test_docs_command_line_exists(where: str, line: str) -> None:
    assert check(line) == [], where


@pytest.mark.parametrize("item", NOT_BUILT_YET.items(), ids=lambda x: " ".join(x[0]))
def test_not_built_yet_is_still_missing(item: tuple[tuple[str, ...], str | None]) -> None:
    """Once one lands, take it off NOT_BUILT_YET (and document it in docs/cli.md)."""
    path, flag = item
    if flag is None:
        assert help_of(path) is None, f"runnel {' '.join(path)} exists now"
    else:
        assert flag not in flags_of(path), f"runnel {' '.join(path)} has {flag} now"


def leaves(path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    children = commands_of(path)
    if path and not children:
        yield path
    for name in sorted(children):
        if (*path, name)[0] not in IN_OTHER_DOCS:
            yield from leaves((*path, name))


def test_cli_md_synopsis_names_every_command() -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    synopsis = "```" + text.split("```", 2)[1] + "```"
    shown = {path for line in runnel_lines(synopsis) for path in resolve(line.split()[1:])[0]}
    assert sorted(set(leaves()) - shown) == []


def test_cli_md_synopsis_names_every_flag() -> None:
    """Each command's line in the synopsis shows every option its --help lists."""
    text = (ROOT / "docs" / "cli.md").read_text()
    synopsis = "```" + text.split("```", 2)[1] + "```"
    shown: dict[tuple[str, ...], set[str]] = {}
    for line in runnel_lines(synopsis):
        paths, rest = resolve(line.split()[1:])
        for path in paths:
            shown.setdefault(path, set()).update(re.findall(r"--[a-z][a-z0-9-]*", " ".join(rest)))
    missing = {
        " ".join(leaf): sorted(flags_of(leaf) - shown.get(leaf, set()) - {"--help"})
        for leaf in leaves()
    }
    assert {k: v for k, v in missing.items() if v} == {}
