"""URLs shown without passwords, and Redis's refusals turned into Runnel's exceptions."""

from __future__ import annotations

import pytest

from runnel.exceptions import AccessDenied, StoreFull
from runnel.urls import redact
from runnel_redis.errors import translate, user_of


@pytest.mark.parametrize(
    "url,shown",
    [
        ("redis://bob:s3cr:et@host:6379/0", "redis://bob:***@host:6379/0"),
        ("redis://:s3cret@host", "redis://:***@host"),
        ("rediss://host:6380/1", "rediss://host:6380/1"),
        ("redis://bob@host/0", "redis://bob@host/0"),
        ("redis://u:s3cret@host:63x9/0", "redis://u:***@host:63x9/0"),
        ("unix:///tmp/r.sock?password=s3cret&db=2", "unix:///tmp/r.sock?password=***&db=2"),
        ("u:s3cret@host:6379", "***@host:6379"),
    ],
)
def test_redact(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_user_of() -> None:
    assert user_of("redis://bob:x@h/0") == "bob"
    assert user_of("redis://:x@h/0") == "default"
    assert user_of("redis://h:bad/0") == "default"


def test_translate() -> None:
    wrong = translate("WRONGPASS invalid username-password pair or user is disabled.", "bob")
    assert isinstance(wrong, AccessDenied)
    assert str(wrong).startswith("authentication failed for user 'bob'")
    denied = translate("NOPERM this user has no permissions to run the 'xreadgroup' command", "b")
    assert isinstance(denied, AccessDenied) and denied.command == "XREADGROUP"
    assert str(denied).startswith("user 'b' may not run XREADGROUP (NOPERM")
    full = translate("OOM command not allowed when used memory > 'maxmemory'.", "b")
    assert isinstance(full, StoreFull)
    assert translate("BUSYGROUP Consumer Group name already exists", "b") is None
