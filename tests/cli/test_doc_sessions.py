"""The console sessions of the docs (fenced blocks with ``$ runnel ...`` lines, each
followed by what it prints) are run against a real redis-server and must print what is
shown, ids and times aside: the docs cannot drift from the code.

Every session is accounted for, so that a new one is run by default or fails here:

- run by this module (``RUN``), or by another test that plays it (``RUN_ELSEWHERE``);
- illustrative only, marked in the Markdown with ``<!-- test: illustrative -->`` on the
  line before the block (a log excerpt with pids and kills, output of a machine that is
  not this one), and listed in ``ILLUSTRATIVE``;
- or listed in ``NOT_RUN_YET``, each with why no test plays it (a situation only the
  clock or chance reproduces); each is checked against ``--help`` by
  tests/cli/test_cli_synopsis.py meanwhile.

Sessions are found by page and heading, so editing a page elsewhere moves nothing.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.processes import cli, env_with

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^(<!-- test: illustrative -->\n)?```(\w*)\n(.*?)^```$", re.M | re.S)
STEP = re.compile(r"^\$ ((?:[A-Z_]+=\S+ )*)runnel (.*)$")


@dataclass
class Session:
    page: str
    heading: str
    index: int  # among the sessions under that heading
    marked: bool
    body: str

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.page, self.heading, self.index)


def sessions() -> list[Session]:
    found = []
    for page in PAGES:
        text = page.read_text()
        counts: dict[str, int] = {}
        for match in BLOCK.finditer(text):
            body = match.group(3)
            if not any(STEP.match(line) for line in body.splitlines()):
                continue
            before = re.sub(r"^```.*?^```$", "", text[: match.start()], flags=re.M | re.S)
            headings = re.findall(r"^#{1,4} (.+)$", before, re.M)
            heading = headings[-1] if headings else ""
            counts[heading] = counts.get(heading, -1) + 1
            found.append(Session(page.name, heading, counts[heading], bool(match.group(1)), body))
    return found


RUN = {
    ("cli.md", "Errors and exit codes", 0): "test_input_errors_print_what_cli_md_shows",
    ("cli.md", "runnel send", 0): "test_a_session_of_the_example_app",
    ("cli.md", "runnel processor reset", 0): "test_a_session_of_the_example_app",
    ("cli.md", "runnel status", 2): "test_a_session_of_the_example_app",
    ("cli.md", "runnel status", 1): "test_the_status_of_an_app_with_a_stream_no_processor_reads",
    ("cli.md", "runnel plugins", 0): "test_the_plugins_session_lists_what_is_loaded",
}
RUN_ELSEWHERE = {
    ("cli.md", "runnel table", 0): "tests/cli/test_cli_tables.py",
    ("cli.md", "runnel table", 1): "tests/cli/test_cli_tables.py",
    ("state.md", "Operating tables", 0): "tests/cli/test_cli_tables.py",
    ("cli.md", "runnel acl", 0): "tests/cli/test_cli_acl.py",
    ("cli.md", "runnel status", 0): "tests/cli/test_doc_sessions_status.py",
    ("cli.md", "runnel jobs info", 0): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "runnel jobs info", 1): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "runnel jobs info", 2): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "runnel jobs show", 0): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "runnel jobs show", 1): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "runnel jobs show", 2): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "runnel jobs send", 0): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "runnel jobs send", 1): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "runnel jobs cancel", 0): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "runnel jobs cancel", 1): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "runnel jobs dead list", 0): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "runnel jobs dead replay", 0): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "runnel jobs dead purge", 0): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "runnel jobs dead purge", 1): "tests/cli/test_doc_sessions_jobs.py",
    ("cli.md", "Commands from plugins", 0): "tests/cli/test_cli_missing_plugins.py",
    ("cli.md", "runnel processor skip", 0): "tests/cli/test_doc_sessions_streams.py",
    ("cli.md", "runnel dead list", 0): "tests/cli/test_doc_sessions_streams.py",
}
ILLUSTRATIVE = {
    # A supervisor's log: pids, and a SIGKILL from outside.
    ("cli.md", "Several processes: --processes", 0),
}
NOT_RUN_YET: set[tuple[str, str, int]] = set()
"""Sessions no test runs yet, each with why (their commands and flags are checked against
--help by tests/cli/test_cli_synopsis.py)."""


def test_every_session_is_run_or_listed() -> None:
    found = {s.key: s for s in sessions()}
    listed = set(RUN) | set(RUN_ELSEWHERE) | ILLUSTRATIVE | NOT_RUN_YET
    accounted = {k for k in found if k in listed or k[0] not in MINE}
    assert sorted(set(found) - accounted) == [], "a new session: run it, or list it here"
    assert sorted(k for k in listed if k not in found) == [], "listed, but no such session"
    assert sorted(k for k, s in found.items() if s.marked) == sorted(ILLUSTRATIVE)


MINE = {"README.md", "cli.md", "guide.md", "architecture.md", "settings.md", "index.md"}
"""Pages whose sessions must each be accounted for here. The pages being rewritten on
other branches at the time this test was written (jobs.md, operations.md, state.md,
performance.md) and the plugins' pages are checked as their sessions get listed."""


def steps(body: str) -> list[tuple[dict[str, str], list[str], str]]:
    """Each ``$`` line of a session: its environment, the runnel arguments, and what it
    prints (the lines up to the next ``$``)."""
    found: list[tuple[dict[str, str], list[str], str]] = []
    for line in body.splitlines(keepends=True):
        match = STEP.match(line.rstrip("\n"))
        if match:
            env = dict(pair.split("=", 1) for pair in match.group(1).split())
            found.append((env, shlex.split(match.group(2), comments=True), ""))
        elif found:
            env, args, shown = found[-1]
            found[-1] = (env, args, shown + line)
    return found


def normalised(text: str) -> str:
    """Entry ids and clock times, which differ from run to run, as placeholders."""
    text = re.sub(r"\b\d{10,}-\d+\b", "ID", text)
    return re.sub(r"\b\d\d:\d\d:\d\d\b", "HH:MM:SS", text)


def session(key: tuple[str, str, int]) -> Session:
    [found] = [s for s in sessions() if s.key == key]
    return found


def readme_app() -> str:
    """The README's example app, as a module named shop (the docs' project)."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## The example app", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    head = "from datetime import datetime\n\nfrom runnel import App, Record\n\n"
    return head + block


EVENT = '{"order_id": 1, "customer": "ada", "created_at": "2024-05-01T12:00:00Z", "items": []}'
NOT_HERE = {
    "redis://bob:wrong@redis:6379/0": "tests/cli/test_cli_credentials.py",
    "redis://full-redis:6379/0": "tests/cli/test_cli_full_redis.py",
}
"""Steps whose server (a host named in the docs) this test does not have: the test named
plays the same refusal on a real server of its own."""


def play(key: tuple[str, str, int], cwd: Path, redis_url: str) -> list[tuple[list[str], str, str]]:
    played = []
    for env, args, shown in steps(session(key).body):
        if env.get("RUNNEL_REDIS_URL") in NOT_HERE or "avro" in shown.split("\n")[0]:
            continue  # elsewhere; the Avro step is tests/cli/test_cli_missing_plugins.py's
        args = [EVENT if a == "{...}" else a for a in args]
        done = cli(*args, cwd=cwd, env=env_with(redis_url, **env))
        assert "Traceback" not in done.stderr, done.stderr
        played.append((args, normalised(shown), normalised(done.stdout + done.stderr)))
    return played


def test_input_errors_print_what_cli_md_shows(tmp_path: Path, redis_url: str) -> None:
    (tmp_path / "shop.py").write_text(readme_app())
    played = play(("cli.md", "Errors and exit codes", 0), tmp_path, redis_url)
    assert len(played) >= 12
    for args, shown, printed in played:
        assert printed == shown, args


EXAMPLE = sorted(k for k, test in RUN.items() if test == "test_a_session_of_the_example_app")


@pytest.mark.parametrize("key", EXAMPLE, ids=lambda k: f"{k[0]}:{k[1]}:{k[2]}")
def test_a_session_of_the_example_app(key: tuple[str, str, int], redis_url: str) -> None:
    """Sessions on examples/orders.py, run from the repository's root as the docs do."""
    played = play(key, ROOT, redis_url)
    assert played
    for args, shown, printed in played:
        assert printed == shown, args


@pytest.mark.parametrize("key", sorted(RUN), ids=lambda k: f"{k[0]}:{k[1]}:{k[2]}")
def test_each_run_session_has_its_test(key: tuple[str, str, int]) -> None:
    assert RUN[key] in globals()


def test_the_normalising_keeps_the_rest() -> None:
    assert normalised("1716552000000-0 at 19:42:53, 3 events") == "ID at HH:MM:SS, 3 events"
    assert subprocess.list2cmdline(["a"]) == "a"


def elided(shown: str, printed: str) -> bool:
    """Whether ``printed`` is what is shown, each ``...`` line standing for any lines."""
    parts = [
        r"(?:[^\n]*\n)*?" if line == "...\n" else re.escape(line)
        for line in shown.splitlines(keepends=True)
    ]
    return re.fullmatch("".join(parts), printed) is not None


def test_the_plugins_session_lists_what_is_loaded(tmp_path: Path) -> None:
    [(env, args, shown)] = steps(session(("cli.md", "runnel plugins", 0)).body)
    done = cli(*args, cwd=tmp_path, env=env_with("redis://127.0.0.1:1/0", **env))
    assert done.returncode == 0, done.stderr
    assert elided(shown, done.stdout), done.stdout
    assert not elided(shown, done.stdout.replace("msgpack", "pickle"))


SHOP_WITH_AUDITS = """
from datetime import datetime

from runnel import App, Record

app = App(name="shop")


class Item(Record):
    sku: str
    quantity: int
    price: float


class Order(Record):
    order_id: int
    customer: str
    created_at: datetime
    items: list[Item]


class Audit(Record):
    user: str
    action: str


orders = app.stream("orders", record=Order, partition_by="customer", partition_count=2)
audits = app.stream("audits", record=Audit, partition_by="user", partition_count=2)


@app.processor(orders)
async def totals(events):
    async for order in events.records():
        print(order.order_id, flush=True)
"""


def test_the_status_of_an_app_with_a_stream_no_processor_reads(
    tmp_path: Path, redis_url: str
) -> None:
    """The page's ``shop`` with a stream ``audits`` of two partitions, to which
    ``runnel sendmany`` sent 8 events: 5 to partition 0 and 3 to partition 1."""
    (tmp_path / "shop.py").write_text(SHOP_WITH_AUDITS)
    spec = importlib.util.spec_from_file_location("shop_with_audits", tmp_path / "shop.py")
    assert spec is not None and spec.loader is not None
    shop = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shop)
    by_partition: dict[int, list[str]] = {0: [], 1: []}
    for n in range(100):
        audit = shop.Audit(user=f"user{n}", action="login")
        by_partition[shop.audits.partition_number(audit)].append(audit.user)
    users = by_partition[0][:5] + by_partition[1][:3]
    lines = "".join(json.dumps({"user": u, "action": "login"}) + "\n" for u in users)
    (tmp_path / "audits.jsonl").write_text(lines)
    sent = cli("sendmany", "shop:audits", "audits.jsonl", cwd=tmp_path, env=env_with(redis_url))
    assert sent.returncode == 0, sent.stderr
    [(args, shown, printed)] = play(("cli.md", "runnel status", 1), tmp_path, redis_url)
    assert printed == shown, args
