"""Lua scripts: each check-and-act on a lock happens atomically inside Redis.

Each script is a file in ``lua/``, whose header comment says what its KEYS and ARGV are.
Scripts that keep a worker going (locks, heartbeats, membership, consumer groups) start
with ``#!lua flags=allow-oom``: Redis 7 then runs their writes even at ``maxmemory`` with
``noeviction``, so a full Redis can still be drained. Redis 6.2 knows no flags and
refuses to compile that line; callers then send the script without it (:func:`plain`).
Sending events (APPEND) has no such flag, on purpose: it is refused when Redis is full.
"""

from importlib import resources

ALLOW_OOM = "#!lua flags=allow-oom\n"


def lua(name: str) -> str:
    """The text of ``lua/NAME.lua`` without its header comment (its leading ``--`` lines),
    so that the documentation does not travel with every EVAL."""
    text = (resources.files("runnel_redis") / "lua" / f"{name}.lua").read_text()
    lines = text.splitlines(keepends=True)
    start = 0
    while start < len(lines) and lines[start].startswith("--"):
        start += 1
    return "".join(lines[start:])


def plain(text: str) -> str:
    """The script without its flags line, for servers that know no script flags."""
    return text.split("\n", 1)[1] if text.startswith("#!") else text


def refuses_flags(reply: object) -> bool:
    """Whether an error reply is a server without script flags refusing a flags line."""
    text = str(reply)
    return isinstance(reply, Exception) and "compiling script" in text and "'#'" in text


# Locks, heartbeats and leadership (coordination.py, cluster.py).
ACQUIRE = ALLOW_OOM + lua("acquire")
RELEASE = lua("release")
BEAT = ALLOW_OOM + lua("beat")
HEARTBEAT = ALLOW_OOM + lua("heartbeat")
EXTEND = ALLOW_OOM + lua("extend")
CLAIM = ALLOW_OOM + lua("claim")
TAKE = ALLOW_OOM + lua("take")
ANNOUNCE = ALLOW_OOM + lua("announce")

# Reading and acknowledging under the partition locks.
CHECK_LOCKS = ALLOW_OOM + lua("check_locks")
FENCED_READ = ALLOW_OOM + lua("fenced_read")
FENCED_ACK_MANY = lua("fenced_ack_many")
ENSURE_GROUP = ALLOW_OOM + lua("ensure_group")
NTH_ID = lua("nth_id")

# Schemas.
ADD_IF_LENGTH = lua("add_if_length")

# Appending to partition streams held to their size: lua/room.lua, then the append.
APPEND = lua("room") + lua("append")
APPEND_AT = lua("room") + lua("append_at")
# An append with an identity (runnel.store.identity), its state kept by lua/identities.lua.
APPEND_IDENTIFIED = lua("room") + lua("identities") + lua("append_identified")

# The job queue (jobs.py).
# Committing table writes with their acknowledgements (tables: runnel/store/state.py).
COMMIT = lua("room") + lua("commit")
RELAY = lua("room") + lua("relay")

JOB_ENQUEUE = lua("job_enqueue")
JOB_TAKE = lua("job_start") + lua("job_take")
JOB_TAKE_QUEUES = lua("job_start") + lua("job_take_queues")
JOB_FINISH = lua("job_workflow") + lua("job_finish")
JOB_PROMOTE = lua("job_promote")
JOB_HASTEN = lua("job_hasten")
JOB_ABANDONED = lua("job_abandoned")
JOB_FORGET = lua("job_forget")
JOB_REPLAY = lua("job_replay")
JOB_PURGE = lua("job_purge")
JOB_SETTLE = lua("job_settle")
JOB_CANCEL = lua("job_workflow") + lua("job_cancel")
JOB_PROGRESS = lua("job_progress")
JOB_ADMIT = lua("job_admit")
JOB_WORKFLOW_ENQUEUE = lua("job_workflow") + lua("job_workflow_enqueue")
JOB_WORKFLOW_CANCEL = lua("job_workflow") + lua("job_workflow_cancel")
