"""`runnel status` before, while and after two workers run."""

from __future__ import annotations

from tests.support.processes import wait_for
from tests.support.worker_cluster import MODULE, PARTITIONS, Cluster, check_overlaps

BATCH = 1200


def test_status_shows_workers_partitions_lag_and_pending(cluster: Cluster) -> None:
    target = f"{MODULE}:app"

    # No worker yet: the backlog is all lag, nobody owns anything.
    cluster.send(BATCH)
    report = cluster.status()
    assert report["app"] == cluster.app_name
    assert report["leader"] is None
    [proc] = report["processors"]
    assert (proc["name"], proc["stream"]) == ("work", "pings")
    assert proc["executors"] == []
    assert [p["number"] for p in proc["partitions"]] == list(range(PARTITIONS))
    assert sum(p["lag"] for p in proc["partitions"]) == BATCH
    assert all(p["owner"] is None and p["pending"] == 0 for p in proc["partitions"])
    text = cluster.run("status", target)
    assert text.returncode == 0, text.stderr
    assert "no workers" in text.stdout

    workers = [cluster.start(), cluster.start()]
    cluster.wait_settled(workers)
    cluster.send(BATCH)
    # While they work: numbers, whatever they are at this instant.
    busy = cluster.status()["processors"][0]
    for p in busy["partitions"]:
        assert isinstance(p["lag"], int) and p["lag"] >= 0
        assert isinstance(p["pending"], int) and p["pending"] >= 0

    cluster.wait_all_seen()
    cluster.check_settled(workers)
    seen = cluster.check_at_least_once_in_order()
    cluster.check_fenced(seen)
    check_overlaps(cluster.overlaps())
    wait_for(lambda: cluster.total_pending() == 0, 30)

    report = cluster.status()
    [proc] = report["processors"]
    executors = proc["executors"]
    assert sorted(e["pid"] for e in executors) == sorted(w.proc.pid for w in workers)
    assert all(e["alive"] for e in executors)
    assert sorted(p for e in executors for p in e["partitions"]) == list(range(PARTITIONS))
    owner = {p: e["id"] for e in executors for p in e["partitions"]}
    for p in proc["partitions"]:
        assert p["owner"] == owner[p["number"]]
        assert (p["lag"], p["pending"]) == (0, 0), p
    assert int(report["leader"].split(":")[1]) in {w.proc.pid for w in workers}

    text = cluster.run("status", target)
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert f"app {cluster.app_name}" in out
    assert "processor work" in out and "no workers" not in out
    for e in executors:
        line = next(x for x in out.splitlines() if f"executor {e['id']}" in x)
        assert f"pid {e['pid']}" in line and "alive" in line and "NOT BEATING" not in line
        assert "partitions " + ",".join(map(str, e["partitions"])) in line
    rows = [x.split() for x in out.splitlines() if x.strip()[:1].isdigit()]
    assert [(int(r[0]), r[1], r[2], r[3]) for r in rows] == [
        (n, owner[n], "0", "0") for n in range(PARTITIONS)
    ]

    for w in workers:
        assert w.stop() == 0, w.output
    report = cluster.status()
    assert report["leader"] is None
    [proc] = report["processors"]
    assert proc["executors"] == []
    assert all(p["owner"] is None for p in proc["partitions"])
    text = cluster.run("status", target)
    assert "no workers" in text.stdout and "alive" not in text.stdout
