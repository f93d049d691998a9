"""Bad input: non-zero exit, exactly one line on stderr naming the problem, nothing sent."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
import redis

from tests.support.cli_app import MODULE, Project, jsonl, pings
from tests.support.ports import free_port
from tests.support.processes import RUNNEL, WorkerProcess, wait_for

STREAM = f"{MODULE}:pings"
APP = f"{MODULE}:app"
UNREACHABLE = "redis://127.0.0.1:1"


def assert_one_line_error(done: subprocess.CompletedProcess[str], *names: str) -> str:
    """Non-zero exit, one line on stderr (no traceback) mentioning every one of ``names``."""
    err = done.stderr.strip()
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert err, "nothing on stderr"
    assert "\n" not in err, f"more than one line on stderr:\n{done.stderr}"
    assert "Traceback" not in err
    for name in names:
        assert name in err, f"{name!r} not named in: {err}"
    return err


def assert_nothing_sent(project: Project) -> None:
    assert project.client.dbsize() == 0, sorted(project.client.scan_iter())


# --- send: the event itself is bad -------------------------------------------------------

BAD_EVENTS = {
    "malformed-json": ('{"key": "a", "n": ', ["malformed JSON"]),
    "not-json-at-all": ("hello", ["malformed JSON"]),
    "json-list": ("[1, 2]", ["JSON object", "list"]),
    "json-string": ('"text"', ["JSON object", "str"]),
    "field-fails-validation": ('{"key": "a", "n": "seven"}', ["n", "integer", "seven"]),
    "wrong-type-nested": ('{"key": {"x": 1}, "n": 1}', ["key", "string"]),
    "missing-field": ('{"key": "a"}', ["n", "missing"]),
    "all-fields-missing": ("{}", ["key", "n", "missing"]),
    "value-with-newline": ('{"key": "a", "n": "1\\n2"}', ["n"]),
    # Python's json reads these; JSON has none of them (nor has orjson).
    "nan-literal": ('{"key": "a", "n": NaN}', ["malformed JSON", "JSON has no NaN or Infinity"]),
    "infinity-literal": (
        '{"key": "a", "n": -Infinity}',
        ["malformed JSON", "JSON has no NaN or Infinity"],
    ),
    "beyond-a-float": ('{"key": "a", "n": 1e400}', ["malformed JSON", "infinity"]),
}


@pytest.mark.parametrize("event,names", BAD_EVENTS.values(), ids=BAD_EVENTS.keys())
def test_send_bad_event(project: Project, event: str, names: list[str]) -> None:
    done = project.run("send", STREAM, event)
    assert_one_line_error(done, *names)
    assert done.stdout == ""
    assert_nothing_sent(project)


# --- sendmany: a bad line anywhere means nothing is sent ------------------------------------


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_sendmany_bad_line_in_the_middle(project: Project, source: str) -> None:
    lines = jsonl(pings(10, keys=3)).splitlines()
    lines[6] = '{"key": "k6", "n": "six"}'  # line 7
    text = "\n".join(lines) + "\n"
    if source == "file":
        (project.dir / "events.jsonl").write_text(text)
        done = project.run("sendmany", STREAM, "events.jsonl")
    else:
        done = project.run("sendmany", STREAM, "-", input=text)
    err = assert_one_line_error(done, "line 7", "n")
    assert "line 1 " not in err
    assert_nothing_sent(project)


@pytest.mark.parametrize(
    "bad,names",
    [
        ("{not json", ["malformed JSON"]),
        ("[1]", ["JSON object"]),
        ('{"key": "k"}', ["n", "missing"]),
    ],
    ids=["malformed", "non-object", "missing-field"],
)
def test_sendmany_bad_line_after_several_chunks(
    project: Project, bad: str, names: list[str]
) -> None:
    """Validation covers every line before the first chunk goes out (chunks are 1000)."""
    lines = jsonl(pings(2500, keys=5)).splitlines()
    lines[2399] = bad  # line 2400
    (project.dir / "events.jsonl").write_text("\n".join(lines) + "\n")
    done = project.run("sendmany", STREAM, "events.jsonl")
    assert_one_line_error(done, "line 2400", *names)
    assert_nothing_sent(project)


def test_sendmany_line_numbers_count_blank_lines(project: Project) -> None:
    text = '{"key": "a", "n": 1}\n\n{"key": "a"}\n'
    done = project.run("sendmany", STREAM, "-", input=text)
    assert_one_line_error(done, "line 3", "n")
    assert_nothing_sent(project)


@pytest.mark.parametrize("content", ["", "\n\n  \n"], ids=["empty", "blank-lines"])
@pytest.mark.parametrize("source", ["file", "stdin"])
def test_sendmany_empty_input(project: Project, content: str, source: str) -> None:
    if source == "file":
        (project.dir / "empty.jsonl").write_text(content)
        done = project.run("sendmany", STREAM, "empty.jsonl")
    else:
        done = project.run("sendmany", STREAM, "-", input=content)
    assert_one_line_error(done, "empty")
    assert_nothing_sent(project)


def test_sendmany_input_not_utf8(project: Project) -> None:
    (project.dir / "events.jsonl").write_bytes(b'{"key": "a", "n": 1}\n{"key": "\xff", "n": 2}\n')
    done = project.run("sendmany", STREAM, "events.jsonl")
    assert_one_line_error(done, "line 2")
    assert_nothing_sent(project)


def test_sendmany_missing_file_sends_nothing(project: Project) -> None:
    done = project.run("sendmany", STREAM, "nosuchfile.jsonl")
    assert done.returncode != 0
    assert "nosuchfile.jsonl" in done.stderr
    assert "Traceback" not in done.stderr
    assert_nothing_sent(project)


def test_sendmany_missing_file_one_line(project: Project) -> None:
    done = project.run("sendmany", STREAM, "nosuchfile.jsonl")
    assert_one_line_error(done, "nosuchfile.jsonl")


# --- MODULE:NAME targets ---------------------------------------------------------------------

GOOD_EVENT = '{"key": "a", "n": 1}'

BAD_TARGETS = {
    # command line, names the error must mention
    "send-unknown-module": (["send", "nosuchmod:pings", GOOD_EVENT], ["nosuchmod"]),
    "sendmany-unknown-module": (["sendmany", "nosuchmod:pings", "-"], ["nosuchmod"]),
    "worker-unknown-module": (["worker", "nosuchmod:app"], ["nosuchmod"]),
    "reset-unknown-module": (["processor", "reset", "nosuchmod:a"], ["nosuchmod"]),
    "unknown-submodule": (["send", f"{MODULE}.sub:pings", GOOD_EVENT], [f"{MODULE}.sub"]),
    "send-no-attribute": (["send", f"{MODULE}:nosuch", GOOD_EVENT], [MODULE, "nosuch"]),
    "reset-no-attribute": (["processor", "reset", f"{MODULE}:nosuch"], [MODULE, "nosuch"]),
    "worker-given-stream": (["worker", STREAM], [STREAM, "App"]),
    "worker-given-processor": (["worker", f"{MODULE}:a"], [f"{MODULE}:a", "App"]),
    "send-given-app": (["send", APP, GOOD_EVENT], [APP, "Stream"]),
    "send-given-record-class": (
        ["send", f"{MODULE}:Ping", GOOD_EVENT],
        [f"{MODULE}:Ping", "Stream"],
    ),
    "sendmany-given-app": (["sendmany", APP, "-"], [APP, "Stream"]),
    "reset-given-stream": (["processor", "reset", STREAM], [STREAM, "processor"]),
    "send-no-colon": (["send", MODULE, GOOD_EVENT], [MODULE, "MODULE:NAME"]),
    "worker-no-colon": (["worker", MODULE], [MODULE, "MODULE:NAME"]),
    "reset-no-colon": (["processor", "reset", MODULE], [MODULE, "MODULE:NAME"]),
    "empty-module": (["send", ":pings", GOOD_EVENT], ["MODULE:NAME"]),
    "empty-name": (["send", f"{MODULE}:", GOOD_EVENT], ["MODULE:NAME"]),
}


@pytest.mark.parametrize("args,names", BAD_TARGETS.values(), ids=BAD_TARGETS.keys())
def test_bad_target(project: Project, args: list[str], names: list[str]) -> None:
    done = project.run(*args, input=jsonl(pings(3, keys=1)))
    assert_one_line_error(done, *names)
    assert_nothing_sent(project)


def test_module_failing_on_import_is_one_line(project: Project) -> None:
    (project.dir / "boom.py").write_text('raise RuntimeError("boom\\nsecond line")\n')
    done = project.run("send", "boom:pings", GOOD_EVENT)
    assert_one_line_error(done, "boom", "RuntimeError")
    assert_nothing_sent(project)


def test_module_with_syntax_error_is_one_line(project: Project) -> None:
    (project.dir / "broken.py").write_text("def (\n")
    done = project.run("worker", "broken:app")
    assert_one_line_error(done, "broken", "SyntaxError")
    assert_nothing_sent(project)


def test_module_importing_a_missing_module_names_it(project: Project) -> None:
    (project.dir / "needsdep.py").write_text("import zzdependency\n")
    done = project.run("send", "needsdep:pings", GOOD_EVENT)
    assert_one_line_error(done, "zzdependency")
    assert_nothing_sent(project)


def test_module_importing_a_prefix_named_missing_module_names_it(project: Project) -> None:
    """zzdep_app exists; what is missing is zzdep, a string prefix of its name."""
    (project.dir / "zzdep_app.py").write_text("import zzdep\n")
    done = project.run("send", "zzdep_app:pings", GOOD_EVENT)
    assert_one_line_error(done, "'zzdep'")
    assert_nothing_sent(project)


# --- worker --processors, processor reset --start, --plugin ---------------------------------


@pytest.mark.parametrize("chosen", ["nosuch", "a,nosuch", "nosuch,b"])
def test_worker_unknown_processor(project: Project, chosen: str) -> None:
    done = project.run("worker", APP, "--processors", chosen)
    err = assert_one_line_error(done, "nosuch")
    # The processors are named as declared (and as --processors takes them), not by id.
    assert err.endswith(f"(app {project.app_name} has: a, b)"), err
    assert_nothing_sent(project)


BAD_STARTS = ["abc", "-1", "1-x", "1-2-3", ""]


@pytest.mark.parametrize("start", BAD_STARTS)
def test_reset_bad_start(project: Project, start: str) -> None:
    done = project.run("processor", "reset", f"{MODULE}:a", "--start", start)
    assert_one_line_error(done, "--start")
    assert_nothing_sent(project)


def group_state(project: Project, processor: str = "a") -> dict[str, tuple[bytes, int]]:
    state = {}
    for key in project.partition_keys():
        for group in project.client.xinfo_groups(key):
            if group["name"].decode() == processor:
                state[key] = (group["last-delivered-id"], group["pending"])
    return state


@pytest.fixture
def processed_project(project: Project) -> Project:
    """Processor a has consumed everything once (its groups exist on every partition)."""
    events = pings(40, keys=8)
    assert project.run("sendmany", STREAM, "-", input=jsonl(events)).returncode == 0
    with WorkerProcess(APP, project.dir, project.env, "--processors", "a") as worker:
        wait_for(lambda: len(project.seen("a")) >= 40)
        assert worker.stop() == 0, worker.output
    return project


@pytest.mark.parametrize("start", ["abc", "1-x"])
def test_reset_bad_start_keeps_group_position(processed_project: Project, start: str) -> None:
    project = processed_project
    before = group_state(project)
    assert len(before) == 4
    done = project.run("processor", "reset", f"{MODULE}:a", "--start", start)
    assert_one_line_error(done, "--start")
    assert group_state(project) == before


@pytest.mark.parametrize("start", ["99999999999999999999999", "1-99999999999999999999999"])
def test_reset_out_of_range_start_keeps_group_position(
    processed_project: Project, start: str
) -> None:
    project = processed_project
    before = group_state(project)
    done = project.run("processor", "reset", f"{MODULE}:a", "--start", start)
    assert_one_line_error(done, "--start")
    assert group_state(project) == before


PLUGIN_COMMANDS = {
    "send": ["send", STREAM, GOOD_EVENT],
    "sendmany": ["sendmany", STREAM, "-"],
    "worker": ["worker", APP],
    "reset": ["processor", "reset", f"{MODULE}:a"],
}


@pytest.mark.parametrize("args", PLUGIN_COMMANDS.values(), ids=PLUGIN_COMMANDS.keys())
def test_unknown_plugin(project: Project, args: list[str]) -> None:
    done = project.run(*args, "--plugin", "nosuchmodule", input=jsonl(pings(3, keys=1)))
    assert_one_line_error(done, "nosuchmodule")
    assert_nothing_sent(project)


# --- Redis that cannot be reached -----------------------------------------------------------

UNREACHABLE_COMMANDS = {
    "send": ["send", STREAM, GOOD_EVENT],
    "sendmany": ["sendmany", STREAM, "-"],
    "reset": ["processor", "reset", f"{MODULE}:a"],
}


@pytest.mark.parametrize("args", UNREACHABLE_COMMANDS.values(), ids=UNREACHABLE_COMMANDS.keys())
def test_unreachable_redis(project: Project, args: list[str]) -> None:
    env = project.env_with(RUNNEL_REDIS_URL=UNREACHABLE)
    done = project.run(*args, input=jsonl(pings(3, keys=1)), env=env)
    assert_one_line_error(done, "127.0.0.1:1")
    assert done.stdout == ""
    assert_nothing_sent(project)


def test_unknown_url_scheme(project: Project) -> None:
    env = project.env_with(RUNNEL_REDIS_URL="nosuchscheme://somewhere")
    done = project.run("send", STREAM, GOOD_EVENT, env=env)
    assert_one_line_error(done, "nosuchscheme")
    assert_nothing_sent(project)


# --- issue 12: every error is one line ------------------------------------------------------

SECRET = "Pw-5e3cret"


@pytest.mark.parametrize(
    "url,names",
    [
        (f"redis://u:{SECRET}@127.0.0.1:63x9/0", ["63x9", "u:***@"]),
        (f"redis://u:{SECRET}@127.0.0.1:99999/0", ["range", "u:***@"]),
        ("localhost:6379", ["no scheme", "localhost:6379"]),
        (f"u:{SECRET}@localhost:6379", ["no scheme"]),
        (f"redis://u:{SECRET}@[::1:6379/0", ["Invalid IPv6 URL", "u:***@"]),
    ],
    ids=[
        "port-not-a-number",
        "port-out-of-range",
        "no-scheme",
        "no-scheme-with-password",
        "unclosed-ipv6-bracket",
    ],
)
def test_malformed_redis_url(project: Project, url: str, names: list[str]) -> None:
    for args in (["send", STREAM, GOOD_EVENT], ["status", APP]):
        done = project.run(*args, env=project.env_with(RUNNEL_REDIS_URL=url))
        err = assert_one_line_error(done, *names)
        assert SECRET not in err + done.stdout
    assert_nothing_sent(project)


@pytest.mark.parametrize("command", ["status", "stop"])
def test_embedded_commands_refuse_other_urls(project: Project, command: str) -> None:
    done = project.run("embedded", command, "--url", f"redis://u:{SECRET}@127.0.0.1:6390/0")
    err = assert_one_line_error(done, "not an embedded URL", "redis+embedded://")
    assert SECRET not in err


@pytest.mark.parametrize(
    "variable,value",
    [("RUNNEL_DEFAULT_LOCK_EXPIRY", "soon"), ("RUNNEL_LOG_LEVEL", "loud")],
)
def test_invalid_environment_variable_is_named(project: Project, variable: str, value: str) -> None:
    done = project.run("send", STREAM, GOOD_EVENT, env=project.env_with(**{variable: value}))
    err = assert_one_line_error(done, variable, value)
    assert "importing" not in err
    assert_nothing_sent(project)


def test_json_null_record(project: Project) -> None:
    done = project.run("send", STREAM, "null")
    assert_one_line_error(done, "JSON object", "null")
    assert_nothing_sent(project)


def test_import_failure_names_file_and_line(project: Project) -> None:
    (project.dir / "failing.py").write_text("import os\n\n\nos.environ['NO_SUCH_VARIABLE_12']\n")
    done = project.run("send", "failing:pings", GOOD_EVENT)
    assert_one_line_error(done, "failing.py, line 4", "KeyError")
    shown = project.run("--traceback", "send", "failing:pings", GOOD_EVENT)
    assert shown.returncode == 1
    assert "Traceback (most recent call last)" in shown.stderr
    assert shown.stderr.strip().splitlines()[-1].startswith("Error: importing 'failing:pings'")


def test_worker_says_once_it_cannot_reach_redis_then_reconnected(project: Project) -> None:
    from runnel_redis.embedded import start_server

    port = free_port()
    url = f"redis://:{SECRET}@127.0.0.1:{port}/0"
    with WorkerProcess(APP, project.dir, project.env_with(RUNNEL_REDIS_URL=url)) as worker:
        wait_for(lambda: "retrying quietly" in worker.output)
        server = start_server(project.dir / "late", port=port, persist=False)
        try:
            late = redis.Redis(port=port)
            late.config_set("requirepass", SECRET)
            late.close()
            wait_for(lambda: "reconnected to" in worker.output, timeout=60)
            sent = project.run(
                "send", STREAM, GOOD_EVENT, env=project.env_with(RUNNEL_REDIS_URL=url)
            )
            assert sent.returncode == 0, sent.stderr
            wait_for(lambda: project.seen("a"), timeout=60)
            assert worker.stop() == 0, worker.output
        finally:
            os.kill(server.pid, signal.SIGTERM)
    output = worker.output
    assert SECRET not in output
    warnings = [line for line in output.splitlines() if "retrying quietly" in line]
    assert len(warnings) == 1, output
    assert f"redis://:***@127.0.0.1:{port}/0" in warnings[0]
    assert "Traceback" not in output


def unread_by_server(port: int) -> int:
    """Bytes that clients sent to the server on ``port`` that it has not read yet (the
    receive queues of its connections, from /proc/net/tcp)."""
    total = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, queues = fields[1], fields[3], fields[4]
        if int(local.split(":")[1], 16) == port and state == "01":  # ESTABLISHED
            total += int(queues.split(":")[1], 16)
    return total


class Stopped:
    """`runnel sendmany` of many events to a redis-server of its own, which is paused
    (SIGSTOP, with ``pause``) once the first chunk is in and the CLI has written another
    it has not read; the CLI is interrupted (SIGINT, with ``interrupt``). What the CLI
    said, and what Redis holds once it runs again."""

    TOTAL = 200_000

    def __init__(
        self,
        project: Project,
        directory: Path,
        *,
        pause: bool,
        interrupt: bool = True,
        socket_timeout: float = 60,
    ) -> None:
        from tests.support.ports import start_redis

        server = start_redis(directory, persist=False)
        self.url = f"{server.url}?socket_timeout={socket_timeout:g}"
        (project.dir / "many.jsonl").write_text(jsonl(pings(self.TOTAL, keys=7)))
        client = redis.Redis(port=server.port)
        proc = subprocess.Popen(
            [*RUNNEL, "sendmany", STREAM, "many.jsonl"],
            cwd=project.dir,
            env=project.env_with(RUNNEL_REDIS_URL=self.url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            keys = project.partition_keys()
            wait_for(lambda: sum(client.xlen(k) for k in keys) >= 1000, interval=0.01)
            if pause:  # the chunk in flight gets no reply until the server runs again
                os.kill(server.pid, signal.SIGSTOP)
                wait_for(lambda: unread_by_server(server.port) > 0, interval=0.01)
            if interrupt:
                proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
            os.kill(server.pid, signal.SIGCONT)
            # The server may still hold the CLI's last bytes: once its connections are
            # gone, it has run every whole command they carried. Count in one transaction.
            wait_for(lambda: len(client.client_list()) == 1)
            with client.pipeline(transaction=True) as pipe:
                for key in keys:
                    pipe.xlen(key)
                self.stored = sum(pipe.execute())
        finally:
            if proc.poll() is None:
                proc.kill()
            os.kill(server.pid, signal.SIGCONT)
            os.kill(server.pid, signal.SIGTERM)
            client.close()
        self.returncode = proc.returncode
        self.line = err.strip()
        assert "\n" not in self.line, err

    def sent(self, line: str) -> int:
        """The count of events the message says were sent."""
        found = re.search(r" after (?:sending )?(\d+) of ", line)
        assert found, line
        return int(found.group(1))


def test_ctrl_c_during_sendmany_says_exactly_what_is_in_redis(
    project: Project, tmp_path: Path
) -> None:
    """Ctrl-C while a chunk is in flight waits for its reply: the count named is what
    Redis holds, so resending from the line named repeats nothing."""
    done = Stopped(project, tmp_path / "live", pause=False)
    assert done.returncode == 1
    total, stored = Stopped.TOTAL, done.stored
    assert 1000 <= stored < total and stored % 1000 == 0
    assert done.line == (
        f"Error: interrupted after sending {stored} of {total} events "
        f"(the first unsent is line {stored + 1})"
    )


def test_ctrl_c_during_sendmany_names_the_chunk_in_doubt(project: Project, tmp_path: Path) -> None:
    """The chunk in flight gets no reply: Ctrl-C waits a bounded time for it, then names
    what is surely in, the lines that may or may not be, and the first line surely not
    sent."""
    from runnel.cli.send import SETTLE

    done = Stopped(project, tmp_path / "paused", pause=True)
    assert done.returncode == 1
    line, total = done.line, Stopped.TOTAL
    sent = done.sent(line)
    assert sent % 1000 == 0 and done.stored in (sent, sent + 1000)
    assert line == (
        f"Error: interrupted after sending {sent} of {total} events; no reply came within "
        f"{SETTLE:g} s for lines {sent + 1} to {sent + 1000}, so they may or may not be in "
        f"Redis (the first line surely unsent is line {sent + 1001})"
    )


def test_sendmany_names_the_chunk_in_doubt_when_its_reply_times_out(
    project: Project, tmp_path: Path
) -> None:
    """A Redis that stops answering: the chunk written before the reply timed out may be
    in, so it is named as in doubt, not as unsent."""
    done = Stopped(project, tmp_path / "paused", pause=True, interrupt=False, socket_timeout=1)
    assert done.returncode == 1
    line, total = done.line, Stopped.TOTAL
    sent = done.sent(line)
    assert sent % 1000 == 0 and done.stored in (sent, sent + 1000)
    assert line.startswith(
        f"Error: sending failed after {sent} of {total} events; no reply came for lines "
        f"{sent + 1} to {sent + 1000}, so they may or may not be in Redis (the first line "
        f"surely unsent is line {sent + 1001}): cannot reach {done.url}: Timeout reading"
    ), line


# --- exit codes, as docs/cli.md documents them ------------------------------------------------


def documented_exit_codes() -> set[int]:
    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    table = text.split("## Errors and exit codes", 1)[1].split("\n\n", 2)[1]
    return {int(row.split("|")[1]) for row in table.splitlines()[2:] if row.startswith("| ")}


def test_documented_exit_codes(project: Project) -> None:
    assert documented_exit_codes() == {0, 1, 2, 3}
    # 0: success.
    assert project.run("send", STREAM, GOOD_EVENT).returncode == 0
    # 1: an error Runnel reports, as one line (an unreadable input file included) ...
    assert_one_line_error(project.run("send", STREAM, "[1]"), "JSON object")
    done = project.run("sendmany", STREAM, "no-such-file.jsonl")
    assert done.returncode == 1
    # ... and `embedded status` when the server is not running.
    (project.dir / "pyproject.toml").write_text("")
    status = project.run("embedded", "status")
    assert status.returncode == 1 and "not running" in status.stdout
    # 2: the command line itself is wrong.
    for args in (["send", STREAM], ["send", "--bogus", STREAM, "{}"], ["nosuchcommand"]):
        assert project.run(*args).returncode == 2
    assert project.run("worker", APP, "--processes", "0").returncode == 2
    # 3: a worker refused by the store: tests/cli/test_cli_credentials.py.
