"""Lua scripts: each check-and-act on a lock happens atomically inside Redis."""

# KEYS: partition locks. ARGV: owner, ttl_ms. Take free locks, refresh ours; 1 = ours.
ACQUIRE = """
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
BEAT = """
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

# KEYS: partition locks. ARGV: owner. Returns held[i] = 1 or 0 per lock. Runs between
# WATCH on the locks and the MULTI/EXEC that reads their partitions (see
# RedisCoordination.read). Every lock that is not ours is touched, so that Redis refuses
# the transaction: one another executor holds gets its expiry set again to what is left
# of it (value kept); a free one is set and deleted again. If Redis is out of memory and
# refuses that SET, the read of a free partition goes ahead: harmless, as what it
# delivers stays pending in the group, and whoever takes the partition next reads its
# pending entries first (the reply reports it lost, and its entries are dropped).
CHECK_LOCKS = """
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
CLAIM = """
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

# KEYS: the partition streams a batch goes to. ARGV[1]: MAXLEN (empty: no trimming), then
# per entry: the index of its stream in KEYS, its number of fields, then its fields and
# values. Appends every entry, in order, and returns their ids; or, if any key holds
# something other than a stream, appends none. (Redis refuses a script's first write
# when it is out of memory, and then nothing is written either.)
APPEND = """
for _, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'stream' and kind ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. kind .. ', not a stream')
  end
end
local head = {'XADD', '', '*'}
if ARGV[1] ~= '' then
  head = {'XADD', '', 'MAXLEN', '~', ARGV[1], '*'}
end
local ids = {}
local i = 2
local last = #ARGV
while i <= last do
  local args = {unpack(head)}
  args[2] = KEYS[tonumber(ARGV[i])]
  local stop = i + 1 + 2 * tonumber(ARGV[i + 1])
  for j = i + 2, stop do
    args[#args + 1] = ARGV[j]
  end
  ids[#ids + 1] = redis.call(unpack(args))
  i = stop + 1
end
return ids
"""
