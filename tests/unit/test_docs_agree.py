"""The docs say what the code does, where users take them at their word:

- every Markdown table of docs/*.md and README.md that names Redis commands is checked:
  a table saying which commands each operation of the Redis store runs names, per row,
  exactly the commands the code of that operation runs (read from runnel-redis's source
  and its Lua scripts, the source `runnel acl` is checked against), and lists every
  operation that runs any; the job scripts' table names only commands of the script of
  its row; any other table only commands `runnel acl` grants;
- a command named anywhere else in the docs' text is one `runnel acl` grants, unless it is
  declared below as mentioned, not sent;
- every default a table or a sentence states for a setting is the setting's default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runnel.settings import Settings
from runnel.store.coordination import Coordination, Leadership
from runnel.store.log import Log, LogAdmin
from runnel_redis import acl
from tests.support.redis_code import Code, command_of, lua_file_commands

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


@dataclass
class Table:
    page: str
    line: int
    header: list[str]
    rows: list[list[str]]


def split_row(line: str) -> list[str]:
    """A table row's cells: split on ``|`` outside code spans and not escaped."""
    cells, cell, code, i = [], "", False, 0
    text = line.strip()
    text = text[1:] if text.startswith("|") else text
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] == "|":
            cell += "|"
            i += 2
            continue
        if c == "`":
            code = not code
        if c == "|" and not code:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += c
        i += 1
    if cell.strip():
        cells.append(cell.strip())
    return cells


def prose(text: str) -> str:
    """The page without its fenced code blocks (each line kept, as an empty one)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def tables(path: Path) -> list[Table]:
    lines = prose(path.read_text()).splitlines()
    found, i = [], 0
    while i < len(lines) - 1:
        if lines[i].lstrip().startswith("|") and re.fullmatch(
            r"\s*\|?(\s*:?-{3,}:?\s*\|)+\s*:?-*:?\s*", lines[i + 1]
        ):
            header, rows, j = split_row(lines[i]), [], i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append(split_row(lines[j]))
                j += 1
            for row in rows:
                assert len(row) == len(header), f"{path.name}:{i + 1}: {row}"
            found.append(Table(path.name, i + 1, header, rows))
            i = j
        else:
            i += 1
    return found


def spans(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


NOT_A_COMMAND = {
    "TTL exhausted": "an error message of redis-py (cluster.md)",
    "JSON": "a format",
}


def commands_in(text: str) -> set[str]:
    """The Redis commands a cell or a text names, each in a code span of its own that
    starts with it (``XGROUP CREATE ... 0`` is ``xgroup|create``)."""
    found = set()
    for span in spans(text):
        words = span.split()
        if span in NOT_A_COMMAND or (len(words) > 1 and words[1].startswith("/")):
            continue  # an HTTP request (GET /api/state)
        command = command_of(words)
        if command is not None:
            found.add(command)
    return found


def all_tables() -> list[Table]:
    return [t for page in PAGES for t in tables(page)]


CODE = Code()

STORE_TABLES = {
    ("architecture.md", "What the Redis store does"): ("RedisTransport", (Log, LogAdmin)),
    ("architecture.md", "Redis"): ("RedisCoordination", (Coordination,)),
    ("architecture.md", "Redis, on the leader key"): ("RedisLeadership", (Leadership,)),
    ("jobs.md", "Redis"): ("RedisJobStore", ()),  # those not scripts (the table above)
}
"""Tables saying which commands each operation of the Redis store runs: the class whose
methods the rows name (first column), and the interfaces all of whose operations that
run a command must have a row."""

SCRIPT_TABLES = {("jobs.md", "Changes")}
"""Tables of Lua scripts (first column: the script's file) and what each changes."""

GRANTED_TABLES = {
    ("architecture.md", "Job"): "the parts of a worker, some with the commands they send",
    ("architecture.md", "Written by"): "the keys, some with the commands that read them",
    ("jobs.md", "Holds"): "the job queue's keys, likewise",
    ("jobs.md", "Runnel"): "Runnel beside other job queues",
    ("cluster.md", "What happens"): "what redis-py's cluster client does with commands",
    ("spark.md", "Meaning"): "the Spark options, with the commands a round trip is",
    ("settings.md", "Meaning"): "the settings, with the commands some of them add",
    ("performance.md", "spent on"): "where a worker's time goes, by what it sends",
}
"""Other tables naming commands: those must be commands `runnel acl` grants."""

MEASURING_TABLES = {
    ("performance.md", "plain redis-py loop"): "with INFO, read by the benchmark",
    ("performance.md", "Runnel calls/read"): "INFO, read by the benchmark, not by Runnel",
}
"""Tables naming commands the benchmarks (not Runnel) send."""


def kind(table: Table) -> str | None:
    """Which of the registries above the table is in (by its page and a column)."""
    for registry, name in (
        (STORE_TABLES, "store"),
        (SCRIPT_TABLES, "scripts"),
        (GRANTED_TABLES, "granted"),
        (MEASURING_TABLES, "measuring"),
    ):
        if name == "store" and table.header[0] != "Method":
            continue
        if any((table.page, column) in registry for column in table.header):
            return name
    return None


def test_every_table_naming_redis_commands_is_checked() -> None:
    naming = [t for t in all_tables() if any(commands_in(c) for row in t.rows for c in row)]
    assert len(naming) >= 8
    unknown = [f"{t.page}:{t.line} {t.header}" for t in naming if kind(t) is None]
    assert unknown == [], "a table names Redis commands: register it in this test"
    for registry in (STORE_TABLES, SCRIPT_TABLES, GRANTED_TABLES, MEASURING_TABLES):
        for page, column in registry:
            assert any(t.page == page and column in t.header for t in naming), (page, column)


def methods(cell: str) -> list[str]:
    return re.findall(r"`(\w+)\(", cell)


@pytest.mark.parametrize("where", sorted(STORE_TABLES), ids=lambda w: f"{w[0]}:{w[1]}")
def test_each_store_operation_names_the_commands_its_code_runs(where: tuple[str, str]) -> None:
    cls, interfaces = STORE_TABLES[where]
    [table] = [
        t
        for t in all_tables()
        if kind(t) == "store" and t.page == where[0] and where[1] in t.header
    ]
    column = table.header.index(where[1])
    listed: set[str] = set()
    wrong = []
    for row in table.rows:
        names = methods(row[0])
        assert names, row[0]
        listed.update(names)
        documented = commands_in(row[column])
        run = set().union(*(CODE.commands(cls, name) for name in names if CODE.has(cls, name)))
        if documented != run:
            wrong.append(
                f"{row[0]}: documented but not run {sorted(documented - run)}, "
                f"run but not documented {sorted(run - documented)}"
            )
    assert wrong == []
    operations = {
        name for interface in interfaces for name in vars(interface) if not name.startswith("_")
    }
    missing = sorted(
        name
        for name in operations
        if CODE.has(cls, name) and CODE.commands(cls, name) and name not in listed
    )
    assert missing == [], f"operations of {cls} that run commands and have no row"


def test_each_job_script_names_only_commands_it_runs() -> None:
    [table] = [t for t in all_tables() if t.page == "jobs.md" and "Changes" in t.header]
    rows = {}
    for row in table.rows:
        [script] = re.findall(r"`(\w+)\.lua`", row[0])
        rows[script] = row
    scripts = {p.stem for p in (Path(acl.__file__).parent / "lua").glob("job_*.lua")}
    assert sorted(scripts - set(rows) - {"job_start"}) == []  # job_start: part of job_take
    for script, row in rows.items():
        own = set(lua_file_commands(script))
        if script in ("job_take", "job_take_queues"):
            own |= lua_file_commands("job_start")
        named = set().union(*(commands_in(cell) for cell in row[1:]))
        assert sorted(named - own) == [], script


def test_other_tables_name_commands_runnel_acl_grants() -> None:
    granted = set(acl.commands())
    for table in all_tables():
        if kind(table) != "granted":
            continue
        named = set().union(*(commands_in(c) for row in table.rows for c in row))
        assert sorted(named - granted) == [], f"{table.page}:{table.line}"


MENTIONED = {
    "xclaim": "architecture.md: a handover needs none",
    "xgroup|destroy": "operations.md: a rule that refuses it",
    "script|flush": "operations.md: likewise",
    "client|setinfo": "operations.md: what redis-py sends, which the rules leave out",
    "acl|setuser": "what `runnel acl` prints, for an administrator to run",
    "acl|log": "what an administrator reads",
    "info": "INFO memory and cpu: for operators and the benchmarks",
    "memory|usage": "codecs.md: how event sizes were measured",
    "keys": "cluster.md: a command Runnel does not send",
    "scan": "cluster.md: likewise",
    "shutdown": "state.md: how a test stops its redis-server",
}
REFUSED = "managed.md: refused by managed services, and never sent"
for _name in ("acl", "bgrewriteaof", "bgsave", "config", "flushall", "flushdb", "migrate"):
    MENTIONED[_name] = REFUSED
for _name in ("monitor", "object", "psync", "replicaof", "save", "slaveof", "sync"):
    MENTIONED[_name] = REFUSED
for _name in ("mset", "touch", "unlink"):
    MENTIONED[_name] = "managed.md: what Azure's Enterprise clustering lets span slots"
"""Commands the docs' text names that Runnel does not send, and why they are named."""


def test_every_command_the_text_names_is_granted_or_declared() -> None:
    granted = set(acl.commands())
    named: dict[str, set[str]] = {}
    for page in PAGES:
        for command in commands_in(prose(page.read_text())):
            named.setdefault(command, set()).add(page.name)
    undeclared = {c: sorted(p) for c, p in named.items() if c not in granted | set(MENTIONED)}
    assert undeclared == {}
    unused = sorted(set(MENTIONED) - set(named))
    assert unused == [], "declared as mentioned but no longer in the docs"


# Defaults.

FIELDS = Settings.model_fields


def setting(name: str) -> str | None:
    """The setting a doc's name stands for: itself, or a processor or stream option's
    ``default_`` setting (``lock_expiry``: ``default_lock_expiry``)."""
    for candidate in (name, f"default_{name}"):
        if candidate in FIELDS:
            return candidate
    return None


def default(name: str) -> Any:
    value = Settings().model_dump()[name]
    return getattr(value, "name", value)  # an enum by its name (HALT)


def number(text: str) -> float | None:
    found = re.match(r"[\d,_]*\.?\d+", text.strip().strip("`"))
    return float(found.group().replace(",", "").replace("_", "")) if found else None


def agrees(cell: str, value: Any) -> bool:
    """Whether a table's Default cell states ``value``."""
    text = cell.strip()
    literal = text.strip("`")
    if isinstance(value, bool) or value is None:
        return literal.split()[0] == repr(value) if literal else False
    if isinstance(value, int | float):
        return number(text) == float(value)
    if isinstance(value, str):
        return literal in (f'"{value}"', value) or literal.lower() == value.lower()
    return False


SPECIAL = {"default_hasher": "md5 of `repr(key)`"}
"""Defaults that are a function: the words that describe it."""


def test_every_default_a_table_states_is_the_settings() -> None:
    checked = []
    for table in all_tables():
        columns = [c.lower() for c in table.header]
        if "default" not in columns:
            continue
        at = columns.index("default")
        for row in table.rows:
            cell = row[at]
            # A table of settings names them; another (a job's options) only by "the
            # `X` setting (N)": its `timezone` is not the setting `timezone`.
            named = re.fullmatch(r"`(\w+)`", row[0].strip())
            by_name = table.header[0] == "Setting" and named is not None
            name = setting(named.group(1)) if by_name and named else None
            via = re.search(r"the `(\w+)` setting \(([^)]*)\)", cell)
            if via and via.group(1) in FIELDS:
                name, cell = via.group(1), via.group(2)
            if name is None:
                continue
            where = f"{table.page}:{table.line} {row[0]}"
            if name in SPECIAL:
                assert cell == SPECIAL[name], where
            else:
                assert agrees(cell, default(name)), f"{where}: {cell!r} != {default(name)!r}"
            checked.append(name)
    # settings.md lists every setting; jobs.md and rebalance.md theirs again.
    assert set(checked) >= set(FIELDS)
    assert len(checked) >= len(FIELDS) + 15


SENTENCES = [
    # `lock_expiry` (30 s by default ...; `partition_size` (50,000 entries by default);
    # `full_timeout` seconds (30 by default); `assignment_attempts` unsuccessful tries (32
    # by default ...
    re.compile(
        r"(?<!% of )`(?P<name>\w+)`(?: [a-z]+){0,3},? \((?P<stated>[\d.,]+)[^()]*? by default"
    ),
    # The default `prefetch_count` is now 32; the default `assignment_sleep` of 2 s
    re.compile(r"[Tt]he default `(?P<name>\w+)` (?:is (?:now )?|of )(?P<stated>[\d.,]+)"),
    # expires (`lock_expiry`, 30 s by default, ...
    re.compile(r"\(`(?P<name>\w+)`, (?P<stated>[\d.,]+)[^()]*? by default"),
    # Every `lock_expiry / 3` seconds (10 s by default)
    re.compile(
        r"`(?P<name>\w+) (?P<op>[/*]) (?P<by>\d+)` seconds,? \(?(?P<stated>[\d.,]+)[^()]*?"
        r" by default"
    ),
    # 20 % of `lock_expiry` (6 s by default)
    re.compile(r"(?P<pct>\d+) % of `(?P<name>\w+)`,? \((?P<stated>[\d.,]+)[^()]*? by default"),
    # Default: the `job_concurrency` setting (8)
    re.compile(r"the `(?P<name>\w+)` setting,? \(?(?P<stated>[\d.,]+)\)?"),
]


def stated_default(match: re.Match[str]) -> tuple[str | None, float | None, float | None]:
    """The setting a sentence names, the value it states, and what the setting's default
    makes that value (a third of it, 20 % of it)."""
    name = setting(match["name"])
    if name is None:
        return None, None, None
    value = float(default(name))
    found = match.groupdict()
    if found.get("op"):
        by = float(found["by"])
        value = value / by if found["op"] == "/" else value * by
    if found.get("pct"):
        value = value * float(found["pct"]) / 100
    return name, number(match["stated"]), value


def test_every_default_a_sentence_states_is_the_settings() -> None:
    checked = []
    for page in PAGES:
        text = " ".join(prose(page.read_text()).split())
        for pattern in SENTENCES:
            for match in pattern.finditer(text):
                name, stated, value = stated_default(match)
                if name is None:
                    continue
                assert stated == value, f"{page.name}: {match.group()!r}: {value}"
                checked.append((page.name, name))
        # with the defaults (`default_partition_count` 16, `default_prefetch_count` 32)
        for group in re.findall(r"with the defaults \(([^)]*)\)", text):
            for given, stated_text in re.findall(r"`(\w+)` ([\d.,]+)", group):
                name = setting(given)
                assert name is not None, f"{page.name}: {given} is no setting"
                assert number(stated_text) == float(default(name)), f"{page.name}: {group}"
                checked.append((page.name, name))
    assert len(checked) >= 10
    assert ("architecture.md", "default_prefetch_count") in checked


def test_every_default_a_code_comment_states_is_the_settings() -> None:
    """``partition_count=16,  # default: default_partition_count (16)`` in an example."""
    checked = []
    for page in PAGES:
        for name, stated in re.findall(r"# default: (\w+) \(([^)]*)\)", page.read_text()):
            assert name in FIELDS, f"{page.name}: {name} is no setting"
            if name in SPECIAL:
                assert stated == "md5 of repr", page.name
            else:
                assert agrees(stated, default(name)), f"{page.name}: {name} ({stated})"
            checked.append(name)
    assert len(checked) >= 5


def test_the_memory_bound_is_worked_out_from_the_defaults() -> None:
    text = " ".join(prose((ROOT / "docs" / "architecture.md").read_text()).split())
    found = re.search(
        r"with the defaults \(`default_partition_count` (\d+), `default_prefetch_count` (\d+)\),"
        r" under ([\d,]+) events",
        text,
    )
    assert found is not None
    s = Settings()
    bound = 2 * s.default_partition_count * s.default_prefetch_count
    assert int(found.group(3).replace(",", "")) == bound
