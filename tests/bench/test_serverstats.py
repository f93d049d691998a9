"""redis-server's statistics around a benchmark's window (benchmarks/serverstats.py), on
the session's real redis-server: a command run inside EXEC or a script is shown but not
counted twice, and the harness's own polling is left out."""

from __future__ import annotations

import redis

from benchmarks import serverstats


def test_nested_commands_are_shown_but_counted_once(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    for i in range(50):
        client.xadd("s", {"data": str(i)})
    client.xgroup_create("s", "g", id="0")
    before = serverstats.snapshot(redis_url)
    pipe = client.pipeline(transaction=True)
    pipe.xreadgroup("g", "c", {"s": ">"}, count=50)
    [reply] = pipe.execute()
    ids = [xid for xid, _ in reply[0][1]]
    client.eval("return redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))", 1, "s", "g", *ids)
    client.xinfo_groups("s")  # the harness's kind of polling
    after = serverstats.snapshot(redis_url)
    client.close()

    window = serverstats.between(before, after)
    assert set(window.commands) == {"multi", "exec", "xreadgroup", "eval", "xack"}
    assert window.nested("xreadgroup") and window.nested("xack")
    assert not window.nested("exec") and not window.nested("eval")
    top = sum(window.commands[n][1] for n in ("multi", "exec", "eval"))
    assert window.top_usec() == top
    rows = {r["command"]: r for r in serverstats.breakdown(window, 50)}
    assert rows["XACK"]["per_read"] == 1.0  # one EXEC: one read
    assert serverstats.per_event(window, 50)["events_per_read"] == 50.0
    text = serverstats.breakdown_table("one read", window, 50)
    assert "\n  XREADGROUP " in text and "\nEXEC " in text


def test_plain_commands_are_not_nested(redis_url: str) -> None:
    """The plain loop runs no scripts and no MULTI: its XREADGROUP and XACK are its own."""
    client = redis.Redis.from_url(redis_url)
    client.xadd("s", {"data": "x"})
    client.xgroup_create("s", "g", id="0")
    before = serverstats.snapshot(redis_url)
    reply = client.xreadgroup("g", "c", {"s": ">"}, count=8)
    client.xack("s", "g", reply[0][1][0][0])
    after = serverstats.snapshot(redis_url)
    client.close()

    window = serverstats.between(before, after)
    assert not window.nested("xreadgroup") and not window.nested("xack")
    assert window.top_usec() == window.commands["xreadgroup"][1] + window.commands["xack"][1]
