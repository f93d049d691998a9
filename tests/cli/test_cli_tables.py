"""`runnel table` and the table options of `runnel processor reset`, with a real worker
process on a real redis-server, on the windowed table of docs/cli.md ("runnel table").

The app, the sales and the console sessions are read from docs/cli.md itself, and every
command shown there (and in docs/state.md, "Operating tables") is run and must print
exactly what is shown: the docs cannot drift from the code. Then what the docs only
describe: `--json` of `list`, clearing all of a table, `processor reset` keeping or
clearing tables (and what a worker does with the events it reads again), and a worker
refusing a stream whose partition count changed.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.processes import WorkerProcess, cli, cli_on_terminal, env_with, wait_for

DOCS = Path(__file__).parents[2] / "docs"
HANG = 60
RESET = "reset tally on 4 partitions of sales to 0\n"
KEPT = (
    "tables counts, per_minute of stream sales keep their state: the events read again "
    "are applied on top of it (--clear-tables clears them)\n"
)
ASKED = (
    "tables counts, per_minute of stream sales keep their state unless cleared: "
    "clear them too? [y/N]: "
)
CLEARED = "cleared tables counts, per_minute\n"


def section(page: str = "cli.md", heading: str = "## runnel table") -> str:
    text = (DOCS / page).read_text()
    start = text.index(heading + "\n")
    return text[start : text.index("\n## ", start + 1)]


def blocks(page: str = "cli.md", heading: str = "## runnel table") -> list[tuple[str, str]]:
    """The fenced blocks of a section: (language, body)."""
    return re.findall(r"^```(\w*)\n(.*?)^```$", section(page, heading), re.M | re.S)


def sessions(
    page: str = "cli.md", heading: str = "## runnel table"
) -> list[list[tuple[list[str], str]]]:
    """Each console block: its `$ runnel ...` commands with the output shown after each."""
    found = []
    for _, body in blocks(page, heading):
        if not body.startswith("$ "):
            continue
        steps: list[tuple[list[str], str]] = []
        for line in body.splitlines(keepends=True):
            if line.startswith("$ "):
                steps.append((shlex.split(line[2:]), ""))
            else:
                args, shown = steps[-1]
                steps[-1] = (args, shown + line)
        found.append(steps)
    return found


@dataclass
class Shop:
    """docs/cli.md's shop app in a directory, and its Redis."""

    dir: Path
    env: dict[str, str]
    client: redis.Redis

    def run(self, *args: str, input: str = "") -> subprocess.CompletedProcess[str]:
        return cli(*args, cwd=self.dir, env=self.env, input=input)

    def worker(self) -> WorkerProcess:
        return WorkerProcess("shop:app", self.dir, self.env)

    def get(self, table: str, key: str) -> Any:
        """The key's stored value, or None (exit code 1) when none is stored."""
        done = self.run("table", "get", f"shop:{table}", key, "--json")
        entry = json.loads(done.stdout)
        assert done.returncode == (0 if entry["stored"] else 1), done.stderr
        return entry["value"] if entry["stored"] else None

    def list(self) -> dict[str, Any]:
        done = self.run("table", "list", "shop:app", "--json")
        assert done.returncode == 0, done.stderr
        found: dict[str, Any] = json.loads(done.stdout)
        return found

    def state_keys(self) -> list[str]:
        """The tables' hashes and deadlines in Redis."""
        return sorted(k.decode() for k in self.client.scan_iter(match="__t[ad][bu]*:shop.*"))

    def send_sales(self) -> None:
        """The docs' sales, sent as the docs say, then processed by a running worker."""
        done = self.run("sendmany", "shop:sales", "sales.jsonl")
        assert (done.returncode, done.stderr) == (0, "sent 6 events to sales\n"), done.stdout
        wait_for(lambda: self.get("counts", "ada") == 5 and self.get("counts", "bob") == 1, HANG)


@pytest.fixture
def shop(tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> Iterator[Shop]:
    [app] = [body for lang, body in blocks() if lang == "python"]
    assert app.startswith("# shop.py\n")
    (tmp_path / "shop.py").write_text(app)
    [sales] = [body for lang, body in blocks() if body.startswith('{"shop"')]
    (tmp_path / "sales.jsonl").write_text(sales)
    yield Shop(tmp_path, env_with(redis_url), redis_client)


def play(shop: Shop, steps: list[tuple[list[str], str]]) -> None:
    for args, shown in steps:
        assert args[0] == "runnel", args
        done = shop.run(*args[1:])
        assert done.stdout + done.stderr == shown, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr


def test_every_command_of_the_docs_prints_what_the_docs_show(shop: Shop) -> None:
    running, stopped = sessions()
    [in_state_md] = sessions("state.md", "## Operating tables")
    with shop.worker() as worker:
        shop.send_sales()
        play(shop, running)
        play(shop, in_state_md)
        assert shop.list() == {
            "app": "shop",
            "tables": [
                {
                    "name": "counts",
                    "stream": "sales",
                    "keys": 2,
                    "partitions": [
                        {"number": 0, "keys": 1},
                        {"number": 1, "keys": 0},
                        {"number": 2, "keys": 0},
                        {"number": 3, "keys": 1},
                    ],
                },
                {
                    "name": "per_minute",
                    "stream": "sales",
                    "keys": 2,
                    "partitions": [
                        {"number": 0, "keys": 1, "watermark": 1764000042, "late": 0},
                        {"number": 1, "keys": 0, "watermark": None, "late": 0},
                        {"number": 2, "keys": 0, "watermark": None, "late": 0},
                        {"number": 3, "keys": 1, "watermark": 1764000131, "late": 1},
                    ],
                    "windows": {"kind": "tumbling", "size": 60, "grace": 10, "expires": 3600},
                    "late": 1,
                },
            ],
        }
        # Refused while the worker runs, in one line, before asking: nothing was cleared.
        refused = shop.run("table", "clear", "shop:per_minute", input="y\n")
        assert (refused.returncode, refused.stdout) == (1, "")
        assert (
            refused.stderr
            == "Error: workers of tally are running: stop them first (or give --force)\n"
        )
        assert shop.get("per_minute", "ada") != []
        assert worker.stop() == 0, worker.output
    play(shop, stopped)
    assert "__tabl:shop.per_minute.3" not in shop.state_keys()
    assert "__tdue:shop.per_minute.3" not in shop.state_keys()
    assert shop.get("counts", "ada") == 5  # another table of the stream: untouched

    asked = "clear table per_minute (all partitions)?"
    declined = with_terminal(shop, "table", "clear", "shop:per_minute", answer="n\n")
    assert declined == (1, f"{asked} [y/N]: ", "Aborted!\n")
    # No terminal, or no answer from it: one line naming --yes, and nothing cleared.
    no_terminal = shop.run("table", "clear", "shop:per_minute", input="")
    assert (no_terminal.returncode, no_terminal.stdout) == (1, "")
    assert no_terminal.stderr == (
        f'Error: "{asked}" needs an answer and standard input is not a terminal: give --yes '
        "to clear without being asked\n"
    )
    ended = with_terminal(shop, "table", "clear", "shop:per_minute", answer="\x04")
    assert ended == (
        1,
        f"{asked} [y/N]: \n",
        f'Error: "{asked}" got no answer: give --yes to clear without being asked\n',
    )
    assert shop.get("per_minute", "bob") != []

    done = shop.run("table", "clear", "shop:per_minute", "--yes")
    assert (done.returncode, done.stdout) == (0, "cleared table per_minute (all partitions)\n")
    assert shop.state_keys() == ["__tabl:shop.counts.0", "__tabl:shop.counts.3"]
    assert shop.client.hkeys("__tbls:shop") == [b"counts"]  # its partition count forgotten
    dumped = shop.run("table", "dump", "shop:totals", "--json")
    assert (dumped.returncode, dumped.stdout) == (0, "")


def test_a_key_with_no_stored_value_is_said_so_and_exits_1(shop: Shop) -> None:
    """A table's default is what reading a key gives, not a stored value: `get` does not
    print it as the key's value. A table keyed by text takes KEY as text (42 is "42")."""
    done = shop.run("table", "get", "shop:counts", "eve")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        'key "eve" is not stored in table counts (partition 1); the table\'s default is 0\n'
    )
    done = shop.run("table", "get", "shop:counts", "eve", "--json")
    assert (done.returncode, done.stderr) == (1, "")
    assert json.loads(done.stdout) == {
        "table": "counts",
        "key": "eve",
        "partition": 1,
        "stored": False,
        "value": 0,
    }
    done = shop.run("table", "get", "shop:per_minute", "eve")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == 'key "eve" has no windows in table per_minute (partition 1)\n'
    done = shop.run("table", "get", "shop:counts", "42")
    assert (done.returncode, done.stdout) == (1, "")
    assert re.fullmatch(
        r'key "42" is not stored in table counts \(partition \d\); .*\n', done.stderr
    )

    with shop.worker() as worker:
        shop.send_sales()
        assert worker.stop() == 0, worker.output
    done = shop.run("table", "get", "shop:counts", "ada")
    assert (done.returncode, done.stdout, done.stderr) == (0, "5\n", "")
    assert shop.get("counts", '"ada"') == 5  # quoted as JSON text: the same key


def with_terminal(shop: Shop, *args: str, answer: str) -> tuple[int, str, str]:
    """A command whose standard input is a terminal, answering a question it asks."""
    return cli_on_terminal(*args, cwd=shop.dir, env=shop.env, answer=answer)


def test_reset_keeps_tables_and_the_events_read_again_apply_on_top(shop: Shop) -> None:
    with shop.worker() as worker:
        shop.send_sales()
        assert worker.stop() == 0, worker.output
    before = shop.list()

    # Without a terminal nor an option: kept, and said so on stderr.
    done = shop.run("processor", "reset", "shop:tally")
    assert (done.returncode, done.stdout, done.stderr) == (0, RESET, KEPT)
    # On a terminal: asked; "no" keeps them.
    code, out, err = with_terminal(shop, "processor", "reset", "shop:tally", answer="n\n")
    assert (code, out, err) == (0, ASKED + RESET, "")
    done = shop.run("processor", "reset", "shop:tally", "--keep-tables")
    assert (done.returncode, done.stdout, done.stderr) == (0, RESET, "")
    # On a terminal that ends (Ctrl-D): no reset, one line naming the options.
    code, out, err = with_terminal(shop, "processor", "reset", "shop:tally", answer="\x04")
    assert (code, out) == (1, ASKED + "\n")
    assert err == (
        f'Error: "{ASKED.removesuffix(" [y/N]: ")}" got no answer: give --clear-tables or '
        "--keep-tables\n"
    )
    assert shop.list() == before

    with shop.worker() as worker:
        wait_for(lambda: shop.get("counts", "ada") == 10 and shop.get("counts", "bob") == 2, HANG)
        # Partition 3's watermark (1764000131) stayed: every sale of ada but the one in
        # the open minute is late now; bob's minute is open still, so it counts twice.
        assert shop.get("per_minute", "ada") == [
            {"start": 1764000000, "end": 1764000060, "value": 12},
            {"start": 1764000060, "end": 1764000120, "value": 2},
            {"start": 1764000120, "end": 1764000180, "value": 8},
        ]
        assert shop.get("per_minute", "bob") == [
            {"start": 1764000000, "end": 1764000060, "value": 6}
        ]
        [windowed] = [t for t in shop.list()["tables"] if t["name"] == "per_minute"]
        assert windowed["late"] == 5
        assert worker.stop() == 0, worker.output


def test_reset_clears_tables_and_the_worker_builds_them_again(shop: Shop) -> None:
    with shop.worker() as worker:
        shop.send_sales()
        built = shop.list()
        windows = shop.get("per_minute", "ada")
        # Refused while the worker runs, in one line, and nothing is cleared; asked
        # nothing, told nothing about the tables either (that reset does not happen).
        for extra in ((), ("--clear-tables",)):
            done = shop.run("processor", "reset", "shop:tally", *extra)
            assert done.returncode == 1
            assert done.stdout == ""
            [line] = done.stderr.splitlines()
            assert line.startswith("Error: workers of tally are running: "), done.stderr
            assert line.endswith("; stop them first (or give --force)")
        code, out, err = with_terminal(shop, "processor", "reset", "shop:tally", answer="y\n")
        assert (code, out) == (1, "")
        assert err.startswith("Error: workers of tally are running: ")
        assert shop.list() == built
        assert worker.stop() == 0, worker.output

    code, out, err = with_terminal(shop, "processor", "reset", "shop:tally", answer="y\n")
    assert (code, out, err) == (0, ASKED + RESET + CLEARED, "")
    assert shop.state_keys() == []
    done = shop.run("processor", "reset", "shop:tally", "--clear-tables")
    assert (done.returncode, done.stdout, done.stderr) == (0, RESET + CLEARED, "")
    [counts, windowed] = shop.list()["tables"]
    assert counts["keys"] == windowed["keys"] == windowed["late"] == 0
    assert [p["watermark"] for p in windowed["partitions"]] == [None] * 4

    with shop.worker() as worker:  # the stream read again from the start, on empty tables
        wait_for(lambda: shop.list() == built, HANG)
        assert shop.get("per_minute", "ada") == windows
        assert worker.stop() == 0, worker.output


def test_a_changed_partition_count_is_refused_until_the_tables_are_cleared(shop: Shop) -> None:
    with shop.worker() as worker:
        shop.send_sales()
        assert worker.stop() == 0, worker.output
    built = shop.state_keys()
    app = shop.dir / "shop.py"
    app.write_text(app.read_text().replace("partition_count=4", "partition_count=2"))

    with shop.worker() as refused:
        assert refused.proc.wait(HANG) == 1, refused.output
    assert (
        "ERROR   runnel.executor: processor 'tally' cannot start: stream 'sales' is declared "
        "with 2 partitions, but its tables 'counts', 'per_minute' were built with 4: their "
        "keys would be looked for in the wrong partitions. Declare partition_count=4 again, "
        "or clear the tables first (runnel table clear)\n"
    ) in refused.output
    assert "Traceback" not in refused.output
    assert shop.state_keys() == built

    # Cleared as the message says, with the stream declared with 2 partitions: partition
    # 3's state goes too (else it would outlive the partition count it was built with).
    for table in ("counts", "per_minute"):
        done = shop.run("table", "clear", f"shop:{table}", "--yes")
        assert (done.returncode, done.stdout) == (0, f"cleared table {table} (all partitions)\n")
    assert shop.state_keys() == []
    assert shop.client.hkeys("__tbls:shop") == []

    with shop.worker() as worker:
        wait_for(lambda: "owns partitions [0, 1]" in worker.output, HANG)
        wait_for(lambda: shop.client.hget("__tbls:shop", "per_minute") == b"2", HANG)
        assert "cannot start" not in worker.output
        assert worker.stop() == 0, worker.output
