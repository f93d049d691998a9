"""How `runnel sendmany` reads its input twice (runnel.cli.send): the lines are those
``bytes.splitlines`` made of the whole input, however the blocks fall; a file changed
between the validating and the sending reading stops the send, saying so."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runnel import App, Record
from runnel.cli import send


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([b"a", b"b", b"\n", b"\r", b" "]), max_size=60).map(b"".join),
    st.integers(min_value=1, max_value=7),
)
def test_lines_are_those_of_splitlines_whatever_the_blocks(data: bytes, block: int) -> None:
    with tempfile.TemporaryDirectory() as directory:  # hypothesis runs it many times
        path = Path(directory) / "lines.txt"
        path.write_bytes(data)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(send, "BLOCK", block)
            with send._Input(str(path)) as source:
                read = list(source.lines())
                again = list(source.lines(again=True))
    expected = list(enumerate(data.splitlines(), 1))
    assert read == again == expected


class Ping(Record):
    key: str
    n: int


def test_a_file_changed_between_the_readings_stops_the_send(tmp_path: Path) -> None:
    app = App(name="lines", redis_url="memory://")
    pings = app.stream("pings", record=Ping, partition_by="key")
    path = tmp_path / "pings.jsonl"
    path.write_text("".join(f'{{"key": "k", "n": {i}}}\n' for i in range(2500)))
    with send._Input(str(path)) as source:
        progress = send._validate(pings, source)
        assert (progress.total, progress.starts) == (2500, [1, 1001, 2001])
        lines = path.read_text().splitlines()
        lines[1500] = '{"key": "k"}'
        path.write_text("\n".join(lines) + "\n")
        chunks = send._chunks(pings, source, progress)
        records, numbers = next(chunks)
        assert (len(records), numbers[0], numbers[-1]) == (1000, 1, 1000)
        progress.sent = 1000
        with pytest.raises(send._Changed) as changed:
            next(chunks)
    assert changed.value.message(progress) == (
        "sending failed after 1000 of 2500 events (the first unsent is line 1001): the input "
        "changed after it was validated: line 1501: invalid Ping: n: missing"
    )


def test_an_input_that_cannot_be_read_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(click.ClickException, match=r"cannot read .*: No such file"):
        send._Input(str(tmp_path / "none.jsonl"))
