"""Lua scripts: each check-and-act on a lock happens atomically inside Redis.

Scripts that keep a worker going (locks, heartbeats, membership, consumer groups) start
with ``#!lua flags=allow-oom``: Redis 7 then runs their writes even at ``maxmemory`` with
``noeviction``, so a full Redis can still be drained. Redis 6.2 knows no flags and
refuses to compile that line; callers then send the script without it (:func:`plain`).
Sending events (APPEND) has no such flag, on purpose: it is refused when Redis is full.
"""

from importlib import resources

ALLOW_OOM = "#!lua flags=allow-oom\n"


def lua(name: str) -> str:
    """The text of ``lua/NAME.lua``."""
    return (resources.files("runnel_redis") / "lua" / f"{name}.lua").read_text()


def plain(text: str) -> str:
    """The script without its flags line, for servers that know no script flags."""
    return text.split("\n", 1)[1] if text.startswith("#!") else text


def refuses_flags(reply: object) -> bool:
    """Whether an error reply is a server without script flags refusing a flags line."""
    text = str(reply)
    return isinstance(reply, Exception) and "compiling script" in text and "'#'" in text


# KEYS: partition locks. ARGV: owner, ttl_ms. Take free locks, refresh ours; 1 = ours.
ACQUIRE = (
    ALLOW_OOM
    + """
local out = {}
for i, key in ipairs(KEYS) do
  local holder = redis.call('GET', key)
  if holder == false then
    redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
    out[i] = 1
  elseif holder == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
"""
)

# KEYS: locks (or any compare-and-delete keys). ARGV: owner. Delete only what we hold.
RELEASE = """
local n = 0
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('DEL', key)
    n = n + 1
  end
end
return n
"""

# KEYS[1]: our heartbeat; KEYS[2..]: our locks. ARGV: owner, ttl_ms.
# Refresh the heartbeat, extend the locks still ours; 1 = still ours.
BEAT = (
    ALLOW_OOM
    + """
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local out = {}
for i = 2, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
    out[i - 1] = 1
  else
    out[i - 1] = 0
  end
end
return out
"""
)

# KEYS[1]: a heartbeat. ARGV: owner, ttl_ms. BEAT's first half, for a cluster (allowed
# when Redis is full, like BEAT).
HEARTBEAT = (
    ALLOW_OOM
    + """
return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
"""
)

# KEYS[1]: a partition lock. ARGV: owner, ttl_ms. Extend it if ours; 1 = still ours. The
# lock half of BEAT, for a cluster, where the heartbeat and the locks are in other slots.
EXTEND = (
    ALLOW_OOM
    + """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
)

# KEYS[1]: a stream's schemas hash. ARGV: the number of fields the caller read, a
# fingerprint, a schema. Add it only if the hash still has that many fields (schemas are
# only ever added, so an equal count means nothing changed since the caller checked).
ADD_IF_LENGTH = """
if redis.call('HLEN', KEYS[1]) ~= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[3])
return 1
"""

# KEYS: partition locks. ARGV: owner. Returns held[i] = 1 or 0 per lock. Runs between
# WATCH on the locks and the MULTI/EXEC that reads their partitions (see
# RedisCoordination.read). Every lock that is not ours is touched, so that Redis refuses
# the transaction: one another executor holds gets its expiry set again to what is left
# of it (value kept); a free one is set and deleted again. If Redis refuses that SET (out
# of memory on a server without script flags), the read of a free partition goes ahead:
# harmless, as what it delivers stays pending in the group, and whoever takes the
# partition next reads its pending entries first (the reply reports it lost, and its
# entries are dropped).
CHECK_LOCKS = (
    ALLOW_OOM
    + """
local held = {}
for i, lock in ipairs(KEYS) do
  local holder = redis.call('GET', lock)
  if holder == ARGV[1] then
    held[i] = 1
  else
    held[i] = 0
    if holder then
      local left = redis.call('PTTL', lock)
      if left > 0 then
        redis.call('PEXPIRE', lock, left)
      else
        redis.call('SET', lock, holder, 'KEEPTTL')
      end
    else
      redis.pcall('SET', lock, '')
      redis.call('DEL', lock)
    end
  end
end
return held
"""
)

# KEYS: n locks, then their n streams. ARGV: owner, group, then per stream the number of
# its ids and the ids. Acknowledge on each stream only if we hold its lock; return the
# 1-based indexes of those we do not hold. (The ids go to XACK straight from ARGV, in
# slices of at most 1000: no parsing or copying in Lua.)
FENCED_ACK_MANY = """
local n = #KEYS / 2
local lost = {}
local at = 3
for i = 1, n do
  local count = tonumber(ARGV[at])
  local last = at + count
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    lost[#lost + 1] = i
  else
    for first = at + 1, last, 1000 do
      redis.call('XACK', KEYS[n + i], ARGV[2], unpack(ARGV, first, math.min(first + 999, last)))
    end
  end
  at = last + 1
end
return lost
"""

# KEYS[1]: leader key. ARGV: candidate, ttl_ms. Take it if free, keep it if ours.
CLAIM = (
    ALLOW_OOM
    + """
local holder = redis.call('GET', KEYS[1])
if holder == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
elseif holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
)

# Appending to partition streams held to their size: lua/room.lua, then the append.
APPEND = lua("room") + lua("append")
APPEND_AT = lua("room") + lua("append_at")


# KEYS[1]: the admin lock. ARGV: token, ttl_ms. SET NX PX, allowed when Redis is full.
TAKE = (
    ALLOW_OOM
    + """
return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
"""
)

# KEYS[1]: the membership key (or empty), KEYS[2]: the control stream. ARGV: the new
# membership JSON (ignored without KEYS[1]), control MAXLEN, reason, executor.
# Store the membership and announce the change, allowed when Redis is full.
ANNOUNCE = (
    ALLOW_OOM
    + """
if #KEYS == 2 then
  redis.call('SET', KEYS[1], ARGV[1])
end
return redis.call('XADD', KEYS[#KEYS], 'MAXLEN', '~', ARGV[2], '*',
  'reason', ARGV[3], 'executor', ARGV[4])
"""
)

# KEYS: partition streams. ARGV[1]: group. Create the group on each stream that lacks it
# (and the stream too), allowed when Redis is full, so a worker can start on a full Redis.
ENSURE_GROUP = (
    ALLOW_OOM
    + """
for _, key in ipairs(KEYS) do
  local done = redis.pcall('XGROUP', 'CREATE', key, ARGV[1], '0', 'MKSTREAM')
  if type(done) == 'table' and done.err and not string.find(done.err, 'BUSYGROUP') then
    return done
  end
end
return 1
"""
)

# KEYS: n locks, then their n streams. ARGV: owner, group, consumer, count, then the n
# read positions. XREADGROUP on the streams whose lock we hold; returns {held flags,
# reply}. The read for a full Redis, which refuses every command queued in MULTI (see
# RedisCoordination.read); slower, as the entries pass through Lua.
FENCED_READ = (
    ALLOW_OOM
    + """
local n = #KEYS / 2
local held = {}
local args = {'XREADGROUP', 'GROUP', ARGV[2], ARGV[3], 'COUNT', ARGV[4], 'STREAMS'}
local ids = {}
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    held[i] = 1
    args[#args + 1] = KEYS[n + i]
    ids[#ids + 1] = ARGV[4 + i]
  else
    held[i] = 0
  end
end
if #ids == 0 then
  return {held, false}
end
for _, id in ipairs(ids) do
  args[#args + 1] = id
end
return {held, redis.call(unpack(args))}
"""
)

# KEYS[1]: a partition stream. ARGV: first id, last id (both included), n. The id of the
# n-th entry from the first, or of the last one in range if there are fewer; false if
# none. Lets a reader bound what it reads next without fetching the entries.
NTH_ID = """
local found = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[2], 'COUNT', ARGV[3])
if #found == 0 then
  return false
end
return found[#found][1]
"""
