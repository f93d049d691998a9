"""runnel.commands.describe: a ValidationError as one line naming each bad field and its value."""

from __future__ import annotations

from datetime import datetime

import pytest
from pydantic import ValidationError

from runnel import Record
from runnel.commands import describe
from runnel.settings import Settings


class Item(Record):
    id: int
    name: str


class Order(Record):
    order_id: int
    created_at: datetime
    items: list[Item]


def _error(model, data) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    return info.value


def test_one_field():
    line = describe(_error(Item, {"id": "seven", "name": "x"}))
    assert "\n" not in line
    assert line.startswith("id: ")
    assert '(got "seven")' in line


def test_every_bad_field_is_named_with_its_value():
    line = describe(
        _error(
            Order,
            {
                "order_id": "x",
                "created_at": "yesterday",
                "items": [{"id": 3.5, "name": "a"}, {"id": 1}],
            },
        )
    )
    assert "\n" not in line
    parts = line.split("; ")
    assert [p.split(":")[0] for p in parts] == [
        "order_id",
        "created_at",
        "items.0.id",
        "items.1.name",
    ]
    assert '(got "x")' in parts[0]
    assert '(got "yesterday")' in parts[1]
    assert "(got 3.5)" in parts[2]
    assert parts[3] == "items.1.name: missing"


def test_values_with_newlines_stay_on_one_line():
    line = describe(_error(Order, {"order_id": 1, "created_at": "2020-01-01", "items": "a\nb"}))
    assert "\n" not in line
    assert line.startswith("items: ")
    assert '(got "a\\nb")' in line


def test_odd_values_are_shown():
    line = describe(_error(Item, {"id": None, "name": b"\xff"}))
    assert "\n" not in line
    assert "id: " in line and "(got null)" in line
    assert "name: " in line


def test_whole_record_of_wrong_type():
    line = describe(_error(Item, ["not", "a", "dict"]))
    assert "\n" not in line
    assert line.startswith("record: ")
    assert '(got ["not", "a", "dict"])' in line


def test_settings_errors():
    with pytest.raises(ValidationError) as info:
        Settings(log_level="loud", default_partition_count=-1, nope=1)
    line = describe(info.value)
    assert "\n" not in line
    assert "log_level: " in line and '(got "loud")' in line
    assert "default_partition_count: " in line and "(got -1)" in line
    assert "nope: " in line and "(got 1)" in line


def test_values_quoted_in_messages_keep_their_case():
    with pytest.raises(ValidationError) as info:
        Settings(timezone="Mars/Base")
    line = describe(info.value)
    assert "mars/base" not in line
    assert "Mars/Base" in line
