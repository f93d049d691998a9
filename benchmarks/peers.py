"""The job queues `bench jobs` measures Runnel against, each in a virtual environment of its
own (their requirements conflict with Runnel's and with each other's: arq needs redis-py
< 6). Exact versions of everything they pull in are in ``lock/bench-<name>.txt``
(tools/lock.py); only the names and the ranges asked for are here. Plain data, no
imports: tools/lock.py reads this file before anything is installed."""

PEERS: dict[str, list[str]] = {
    "arq": ["arq==0.28.0"],
    # saq 0.26.4 imports typing_extensions without declaring it.
    "saq": ["saq[redis,hiredis]==0.26.4", "typing_extensions"],
    # Only for the workflow row (benchmarks/chord.py).
    "celery": ["celery[redis]==5.7.0"],
}
