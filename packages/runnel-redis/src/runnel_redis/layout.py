"""Key layouts: the 0.1 names (:mod:`runnel_redis.keys`) or hash-tagged names for a Redis Cluster.

A Redis Cluster runs a script, a MULTI/EXEC or a multi-key command only when all its keys
hash to one slot. Runnel's atomic steps touch keys in three groups, so the cluster layout
gives every key of a group one hash tag (the text between the first ``{`` and the next
``}``, which alone decides the slot):

- a partition: its stream, every processor's lock of it (the fenced read, the fenced
  ack and the lock check before a read take a lock and its stream together) and its
  identity state (an append with identities checks and writes it with the stream);
- a processor of a stream: membership, control stream, admin lock, heartbeats, quarantine;
- an app: the leader key and every ``__jobs`` key, those of every named job queue
  included (the job scripts build job, result and named queues' keys from the prefix
  inside Lua, and take from several queues in one step, so all must share a slot).

The schemas of a stream have a tag of their own. Steps that span groups (the heartbeat
refresh of a processor's locks, say) are split by the transport: one call per group.

Names are percent-encoded inside tags (``%``, ``{``, ``}``, ``.``, ``:``; an empty name is
a lone ``%``), so a name can neither end a tag early nor be mistaken for a separator: two
different (kind, names) always give two different keys. Text after a tag (a processor,
executor or job id that ends the key) is kept as it is.

Which layout a transport uses is chosen by the URL scheme (``redis+cluster://``,
``rediss+cluster://``) unless a setting names one; see :func:`layout_for`. docs/cluster.md
lists both side by side.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from runnel.exceptions import Misconfigured
from runnel.jobs.queues import DEFAULT_QUEUE
from runnel_redis import keys
from runnel_redis.keys import queue_suffix

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


class KeyLayout(ABC):
    """Every Redis key name Runnel uses; one implementation per layout."""

    name: ClassVar[str]

    @abstractmethod
    def partition(self, app: str, stream: str, number: int) -> str: ...

    @abstractmethod
    def table(self, app: str, stream: str, table: str, number: int) -> str:
        """A table's hash for partition ``number`` of its source stream (same slot)."""

    @abstractmethod
    def deadlines(self, app: str, stream: str, table: str, number: int) -> str:
        """The deadlines of a table's keys on partition ``number`` (same slot)."""

    @abstractmethod
    def outbox(self, app: str, stream: str, number: int) -> str:
        """Outputs committed on the partition, waiting to be relayed (a Redis Cluster)."""

    @abstractmethod
    def relayed(self, app: str, stream: str, number: int) -> str:
        """Per outbox, the last entry relayed to the partition (a hash, its slot)."""

    @abstractmethod
    def table_counts(self, app: str) -> str:
        """The partition count each table of the app was built with."""

    @abstractmethod
    def lost(self, app: str, stream: str, number: int) -> str:
        """The partition's count of entries trimmed unread, per group (same slot)."""

    @abstractmethod
    def identities(self, app: str, stream: str, number: int) -> str:
        """The partition's identity state: generation, its start, duplicates (same slot)."""

    @abstractmethod
    def identity_keys(self, app: str, stream: str, number: int, generation: int) -> str:
        """Generation 0 or 1 of the call identities and keys it remembers (same slot)."""

    @abstractmethod
    def producers(self, app: str, stream: str, number: int) -> str:
        """The partition's sequenced producers' state (same slot)."""

    @abstractmethod
    def membership(self, app: str, stream: str, processor: str) -> str: ...

    @abstractmethod
    def control(self, app: str, stream: str, processor: str) -> str: ...

    @abstractmethod
    def partition_lock(self, app: str, stream: str, processor: str, number: int) -> str: ...

    @abstractmethod
    def admin_lock(self, app: str, stream: str, processor: str) -> str: ...

    @abstractmethod
    def heartbeat(self, app: str, stream: str, processor: str, executor_id: str) -> str: ...

    @abstractmethod
    def quarantine(self, app: str, stream: str, processor: str) -> str: ...

    @abstractmethod
    def leader(self, app: str) -> str: ...

    @abstractmethod
    def schemas(self, app: str, stream: str) -> str: ...

    @abstractmethod
    def jobs_prefix(self, app: str) -> str:
        """What every key of the app's job queue starts with (the job scripts take it)."""

    def job_queue(self, app: str, queue: str = DEFAULT_QUEUE) -> str:
        return self.jobs_prefix(app) + "queue" + queue_suffix(queue)

    def job_schedule(self, app: str, queue: str = DEFAULT_QUEUE) -> str:
        return self.jobs_prefix(app) + "schedule" + queue_suffix(queue)

    def job_dead(self, app: str, queue: str = DEFAULT_QUEUE) -> str:
        return self.jobs_prefix(app) + "dead" + queue_suffix(queue)

    def job_queues(self, app: str) -> str:
        """The set of the app's named queues (every one that ever held a job)."""
        return self.jobs_prefix(app) + "queues"

    def job_results_index(self, app: str) -> str:
        return self.jobs_prefix(app) + "results"

    def job_executors(self, app: str) -> str:
        return self.jobs_prefix(app) + "executors"

    def job_ticks(self, app: str) -> str:
        """Periodic jobs' last settled ticks (one layout for both: built from the prefix)."""
        return self.jobs_prefix(app) + "ticks"

    def job_totals(self, app: str) -> str:
        """Tries finished since the queue began, by outcome (a hash written with the
        outcomes by job_finish.lua; built from the prefix, as the ticks are)."""
        return self.jobs_prefix(app) + "totals"

    def job(self, app: str, job_id: str) -> str:
        return self.jobs_prefix(app) + "job." + job_id

    def job_result(self, app: str, job_id: str) -> str:
        return self.jobs_prefix(app) + "result." + job_id

    def job_beat(self, app: str, executor: str) -> str:
        return self.jobs_prefix(app) + "beat." + executor

    def job_cancelled_index(self, app: str) -> str:
        return self.jobs_prefix(app) + "cancelled"

    def job_notices(self, app: str, executor: str) -> str:
        """The ids of jobs cancelled while ``executor`` ran them (job_cancel.lua)."""
        return self.jobs_prefix(app) + "cancel." + executor


class Classic(KeyLayout):
    """The 0.1 names, unchanged: for a single Redis (or Sentinel), and 0.1 data."""

    name = "classic"

    def partition(self, app: str, stream: str, number: int) -> str:
        return keys.partition(app, stream, number)

    def lost(self, app: str, stream: str, number: int) -> str:
        return keys.lost(app, stream, number)

    def identities(self, app: str, stream: str, number: int) -> str:
        return keys.identities(app, stream, number)

    def identity_keys(self, app: str, stream: str, number: int, generation: int) -> str:
        return keys.identity_keys(app, stream, number, generation)

    def producers(self, app: str, stream: str, number: int) -> str:
        return keys.producers(app, stream, number)

    def table(self, app: str, stream: str, table: str, number: int) -> str:
        return keys.table(app, table, number)

    def deadlines(self, app: str, stream: str, table: str, number: int) -> str:
        return keys.deadlines(app, table, number)

    def table_counts(self, app: str) -> str:
        return keys.table_counts(app)

    def outbox(self, app: str, stream: str, number: int) -> str:
        return f"__obox:{app}.{stream}.{number}"

    def relayed(self, app: str, stream: str, number: int) -> str:
        return f"__rlay:{app}.{stream}.{number}"

    def membership(self, app: str, stream: str, processor: str) -> str:
        return keys.membership(app, stream, processor)

    def control(self, app: str, stream: str, processor: str) -> str:
        return keys.control(app, stream, processor)

    def partition_lock(self, app: str, stream: str, processor: str, number: int) -> str:
        return keys.partition_lock(app, stream, processor, number)

    def admin_lock(self, app: str, stream: str, processor: str) -> str:
        return keys.admin_lock(app, stream, processor)

    def heartbeat(self, app: str, stream: str, processor: str, executor_id: str) -> str:
        return keys.heartbeat(app, stream, processor, executor_id)

    def quarantine(self, app: str, stream: str, processor: str) -> str:
        return keys.quarantine(app, stream, processor)

    def leader(self, app: str) -> str:
        return keys.leader(app)

    def schemas(self, app: str, stream: str) -> str:
        return keys.schemas(app, stream)

    def jobs_prefix(self, app: str) -> str:
        return keys.jobs_prefix(app)

    def job_queue(self, app: str, queue: str = DEFAULT_QUEUE) -> str:
        return keys.job_queue(app, queue)

    def job_schedule(self, app: str, queue: str = DEFAULT_QUEUE) -> str:
        return keys.job_schedule(app, queue)

    def job_dead(self, app: str, queue: str = DEFAULT_QUEUE) -> str:
        return keys.job_dead(app, queue)

    def job_queues(self, app: str) -> str:
        return keys.job_queues(app)

    def job_results_index(self, app: str) -> str:
        return keys.job_results_index(app)

    def job_executors(self, app: str) -> str:
        return keys.job_executors(app)

    def job(self, app: str, job_id: str) -> str:
        return keys.job(app, job_id)

    def job_result(self, app: str, job_id: str) -> str:
        return keys.job_result(app, job_id)

    def job_beat(self, app: str, executor: str) -> str:
        return keys.job_beat(app, executor)


class Cluster(KeyLayout):
    """Hash-tagged names: the keys of one atomic step always share a slot."""

    name = "cluster"

    # The tags. Each is what goes between the braces; equal tags mean one slot.

    def app_tag(self, app: str) -> str:
        """The leader and the job queue of an app."""
        return encode(app)

    def stream_tag(self, app: str, stream: str) -> str:
        """The schemas of a stream."""
        return f"{encode(app)}.{encode(stream)}"

    def partition_tag(self, app: str, stream: str, number: int) -> str:
        """A partition's stream and every processor's lock of it."""
        return f"{encode(app)}.{encode(stream)}.{int(number)}"

    def processor_tag(self, app: str, stream: str, processor: str) -> str:
        """A processor's membership, control stream, admin lock, heartbeats, quarantine."""
        return f"{encode(app)}.{encode(stream)}:{encode(processor)}"

    # The keys.

    def partition(self, app: str, stream: str, number: int) -> str:
        return f"__strm:{{{self.partition_tag(app, stream, number)}}}"

    def partition_lock(self, app: str, stream: str, processor: str, number: int) -> str:
        return f"__lock:{{{self.partition_tag(app, stream, number)}}}.{processor}"

    def lost(self, app: str, stream: str, number: int) -> str:
        return f"__lost:{{{self.partition_tag(app, stream, number)}}}"

    def identities(self, app: str, stream: str, number: int) -> str:
        return f"__idem:{{{self.partition_tag(app, stream, number)}}}"

    def identity_keys(self, app: str, stream: str, number: int, generation: int) -> str:
        return f"__idem:{{{self.partition_tag(app, stream, number)}}}.k{generation}"

    def producers(self, app: str, stream: str, number: int) -> str:
        return f"__idem:{{{self.partition_tag(app, stream, number)}}}.seq"

    def table(self, app: str, stream: str, table: str, number: int) -> str:
        return f"__tabl:{{{self.partition_tag(app, stream, number)}}}.{table}"

    def deadlines(self, app: str, stream: str, table: str, number: int) -> str:
        return f"__tdue:{{{self.partition_tag(app, stream, number)}}}.{table}"

    def table_counts(self, app: str) -> str:
        return f"__tbls:{{{self.app_tag(app)}}}"

    def outbox(self, app: str, stream: str, number: int) -> str:
        return f"__obox:{{{self.partition_tag(app, stream, number)}}}"

    def relayed(self, app: str, stream: str, number: int) -> str:
        return f"__rlay:{{{self.partition_tag(app, stream, number)}}}"

    def membership(self, app: str, stream: str, processor: str) -> str:
        return f"__memb:{{{self.processor_tag(app, stream, processor)}}}"

    def control(self, app: str, stream: str, processor: str) -> str:
        return f"__ctrl:{{{self.processor_tag(app, stream, processor)}}}"

    def admin_lock(self, app: str, stream: str, processor: str) -> str:
        return f"__lock:{{{self.processor_tag(app, stream, processor)}}}.admin"

    def heartbeat(self, app: str, stream: str, processor: str, executor_id: str) -> str:
        return f"__beat:{{{self.processor_tag(app, stream, processor)}}}.{executor_id}"

    def quarantine(self, app: str, stream: str, processor: str) -> str:
        return f"__quar:{{{self.processor_tag(app, stream, processor)}}}"

    def leader(self, app: str) -> str:
        return f"__lead:{{{self.app_tag(app)}}}"

    def schemas(self, app: str, stream: str) -> str:
        return f"__schm:{{{self.stream_tag(app, stream)}}}"

    def jobs_prefix(self, app: str) -> str:
        return f"__jobs:{{{self.app_tag(app)}}}."


_ENCODED = {char: f"%{ord(char):02X}" for char in "%{}.:"}


def encode(name: str) -> str:
    """A name made safe inside a hash tag: no brace, no separator; decodable, so injective.

    The empty name becomes a lone ``%`` (no other name does), so no tag is ever empty:
    Redis hashes the whole key when its tag is ``{}``.
    """
    return "".join(_ENCODED.get(char, char) for char in name) or "%"


def hash_tag(key: str) -> str:
    """What Redis Cluster hashes for a key: its tag if it has a non-empty one, else all of it."""
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


LAYOUTS: dict[str, type[KeyLayout]] = {Classic.name: Classic, Cluster.name: Cluster}


def layout_for(url: str, setting: str | None = None) -> KeyLayout:
    """The layout a setting names (``classic`` or ``cluster``), else the one the URL's
    scheme implies: ``redis+cluster://`` and ``rediss+cluster://`` mean the cluster one."""
    if setting:
        chosen = LAYOUTS.get(setting.strip().lower())
        if chosen is None:
            known = ", ".join(sorted(LAYOUTS))
            raise Misconfigured(f"unknown key layout {setting!r} (known: {known})")
        return chosen()
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    return Cluster() if scheme in CLUSTER_SCHEMES else Classic()
