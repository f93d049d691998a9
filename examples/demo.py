"""End-to-end demo: an embedded redis-server, a worker, and events sent from the CLI.

Run with `python -m hatch run demo:run` (or `python examples/demo.py` where runnel is
installed). It prints every command it runs, so you can repeat the steps by hand.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNNEL = [sys.executable, "-m", "runnel"]
CUSTOMERS = ["ada", "bob", "cy", "dee", "eve"]


def orders(first: int, count: int) -> list[dict]:
    rng = random.Random(7)
    return [
        {
            "order_id": first + n,
            "customer": rng.choice(CUSTOMERS),
            "created_at": f"2026-11-21T10:{n % 60:02d}:00Z",
            "items": [
                {
                    "sku": rng.choice(["tea", "cake", "jam"]),
                    "quantity": rng.randint(1, 3),
                    "price": 2.5,
                }
                for _ in range(rng.randint(1, 3))
            ],
        }
        for n in range(count)
    ]


def show(cmd: list[str]) -> None:
    print("$ runnel " + " ".join(cmd[len(RUNNEL) :]), flush=True)


def main() -> int:
    from runnel_redis import embedded

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    os.chdir(ROOT)  # the project's embedded server: the one the worker below uses
    directory = embedded.state_dir("redis+embedded://")
    was_running = embedded.running(directory) is not None
    server = embedded.ensure("redis+embedded://", stopped_by="this demo stops it when done")
    print(f"embedded redis-server: {server.url} (files in {server.dir})\n", flush=True)

    worker_cmd = [*RUNNEL, "worker", "examples.orders:app"]
    show(worker_cmd)
    worker = subprocess.Popen(
        worker_cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen: list[str] = []
    first = int(time.time()) * 1000  # this run's order ids, apart from any earlier run's

    def pump() -> None:
        assert worker.stdout is not None
        for line in worker.stdout:
            print("  [worker] " + line, end="", flush=True)
            if line.startswith("order ") and int(line.split()[1]) >= first:
                seen.append(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()

    events = orders(first, count)
    send_cmd = [*RUNNEL, "sendmany", "examples.orders:orders", "-"]
    time.sleep(1)
    show(send_cmd)
    subprocess.run(
        send_cmd, cwd=ROOT, input="\n".join(json.dumps(e) for e in events), text=True, check=True
    )

    deadline = time.monotonic() + 60
    while len(seen) < count and time.monotonic() < deadline and worker.poll() is None:
        time.sleep(0.1)

    print("\n(sending SIGTERM to the worker: it finishes in-flight events and exits)", flush=True)
    worker.send_signal(signal.SIGTERM)
    code = worker.wait(30)
    reader.join(5)
    if not was_running:
        embedded.stop(directory)
        print("(stopped the embedded redis-server this demo started)", flush=True)

    ids = [int(line.split()[1]) for line in seen]
    ok = sorted(ids) == list(range(first, first + count)) and code == 0
    for customer in CUSTOMERS:
        mine = [int(line.split()[1]) for line in seen if f" from {customer}:" in line]
        ok = ok and mine == sorted(mine)
    print(
        f"\nworker exit code {code}; processed {len(ids)} of {count} orders, "
        f"{'each once, in order per customer' if ok else 'NOT as expected'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
