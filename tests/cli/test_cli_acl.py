"""`runnel acl MODULE:APP` as a user runs it: the rules docs/operations.md shows are what
it prints for the README's app, its options, and its one-line errors (a password in the
URL never printed). What the rules are worth is tested in tests/redis_acl."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.support.processes import cli

ROOT = Path(__file__).parents[2]
SECRET = "s3cr3t-pw"


def run(*args: str, url: str | None = None):  # type: ignore[no-untyped-def]
    env = {k: v for k, v in os.environ.items() if k != "RUNNEL_REDIS_URL"}
    if url is not None:
        env["RUNNEL_REDIS_URL"] = url
    return cli("acl", *args, cwd=ROOT, env=env)


def shown_in_operations_md() -> str:
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text[text.index("## Least-privilege Redis") :]
    block = re.search(r"```\n\$ runnel acl examples.orders:app\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


def test_operations_md_shows_what_it_prints_for_the_readme_app() -> None:
    done = run("examples.orders:app")
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown_in_operations_md()


def test_the_cluster_layout_and_another_user_keeping_its_passwords() -> None:
    done = run(
        "examples.orders:app",
        "--user",
        "ops",
        "--no-password",
        url=f"redis+cluster://ops:{SECRET}@redis:7000",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "ACL SETUSER ops on resetkeys resetchannels -@all"
    assert "~__strm:{example.*" in lines[1].split()
    assert "~__jobs:{example}.*" in lines[1].split()
    assert all(line.startswith("ACL SETUSER ops ") for line in lines)
    assert SECRET not in done.stdout + done.stderr
    assert "PASSWORD" not in done.stdout


def test_a_password_in_the_url_is_never_printed() -> None:
    done = run("examples.orders:app", url=f"redis://bob:{SECRET}@redis:6379/0")
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == "ACL SETUSER runnel reset on >PASSWORD"


def test_memory_has_no_acls_in_one_error_line() -> None:
    done = run("examples.orders:app", url="memory://")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "Error: memory:// has no ACLs: it is a store inside one process, with no users "
        "(runnel acl is for a store such as redis://)\n"
    )
    assert done.stderr in (ROOT / "docs" / "cli.md").read_text()


def test_a_store_no_plugin_answers_for_in_one_error_line() -> None:
    done = run("examples.orders:app", url=f"nosuch://bob:{SECRET}@x")
    assert done.returncode == 1
    assert done.stderr == (
        "Error: no loaded plugin knows the access rules of nosuch://bob:***@x "
        "(no plugin answers for nosuch:// stores)\n"
    )


def test_a_target_that_is_not_an_app_in_one_error_line() -> None:
    done = run("examples.orders:orders", url="redis://localhost:6379/0")
    assert done.returncode == 1
    assert done.stderr == "Error: examples.orders:orders is Stream, not an App\n"
