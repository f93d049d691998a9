"""Every question the command line asks goes through ``runnel.commands.ask``, which asks
a terminal only: without one (standard input not a terminal, or ended) it is one
``Error:`` line naming the option that answers, never a prompt then ``Aborted!``
(tests/cli/test_cli_tables.py, test_cli_dead.py, tests/jobs/test_cli_jobs.py play it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
ASKING = re.compile(r"\bclick\.(confirm|prompt)\(|\bconfirmation_option\b|(?<![\w.])input\(")


def test_no_command_asks_but_through_ask() -> None:
    sources = sorted((ROOT / "packages").glob("*/src/**/*.py"))
    assert len(sources) > 50
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sources
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if ASKING.search(line)
    ]
    assert not found, found


def test_the_check_sees_each_way_of_asking() -> None:
    for line in (
        'click.confirm("sure?", abort=True)',
        'x = click.prompt("name")',
        "@click.confirmation_option()",
        'answer = input("? ")',
    ):
        assert ASKING.search(line), line
    assert not ASKING.search("ask(question, answer_with='give --yes')")
    assert not ASKING.search("self.input(x)")
