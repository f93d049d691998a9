-- Commit what processing made of some partitions: per partition, its table writes and
-- the acknowledgement of the entries that made them, together, only if we hold its lock.
-- KEYS, per partition in turn: its lock, its stream, then for each table it writes, the
-- table's hash and its deadlines (a sorted set); after all of them, the streams outputs
-- go to (referred to by their index in KEYS).
-- ARGV: owner, group; then per partition in turn: how many tables it writes, how many ids,
-- the ids; then per table: how many fields to set, the field/value pairs, how many fields
-- to delete, the fields, how many deadlines to set, the score/member pairs, how many to
-- drop, the members; then how many sends, and per send: how many ids, the ids, how
-- many outputs, and per output: its stream's index in KEYS, that stream's cap (empty:
-- none), how many fields, the field/value pairs. A send's outputs are appended only if
-- acknowledging its ids acknowledged any: a commit sent again after its reply was lost
-- finds them acknowledged and appends nothing twice. Outputs are never refused; a stream
-- past its cap is trimmed as an append trims it (room.lua), never past what a group still
-- needs.
-- Returns the 1-based indexes of the partitions whose lock we do not hold (nothing of
-- theirs applied). A partition's writes go before its acknowledgement: the first write of
-- a script is refused when Redis is out of memory, so a full Redis refuses the whole
-- commit rather than acknowledging entries whose state it cannot keep.
local owner, group = ARGV[1], ARGV[2]
local lost = {}
local caps = {}
local k, a, n = 1, 3, 0
local function each(first, last, command, key)
  for from = first, last, 1000 do
    redis.call(command, key, unpack(ARGV, from, math.min(from + 999, last)))
  end
end
while a <= #ARGV do
  n = n + 1
  local lock, stream = KEYS[k], KEYS[k + 1]
  local tables, ids = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local first_id = a + 2
  local last_id = first_id + ids - 1
  a = first_id + ids
  local mine = redis.call('GET', lock) == owner
  if not mine then lost[#lost + 1] = n end
  for t = 1, tables do
    local key, due = KEYS[k + 2 * t], KEYS[k + 2 * t + 1]
    local sets = tonumber(ARGV[a])
    local first_set = a + 1
    a = first_set + 2 * sets
    if mine and sets > 0 then each(first_set, a - 1, 'HSET', key) end
    local dels = tonumber(ARGV[a])
    local first_del = a + 1
    a = first_del + dels
    if mine and dels > 0 then each(first_del, a - 1, 'HDEL', key) end
    local scored = tonumber(ARGV[a])
    local first_score = a + 1
    a = first_score + 2 * scored
    if mine and scored > 0 then each(first_score, a - 1, 'ZADD', due) end
    local dropped = tonumber(ARGV[a])
    local first_drop = a + 1
    a = first_drop + dropped
    if mine and dropped > 0 then each(first_drop, a - 1, 'ZREM', due) end
  end
  local sends = tonumber(ARGV[a])
  a = a + 1
  for _ = 1, sends do
    local count = tonumber(ARGV[a])
    local first, last = a + 1, a + count
    a = last + 1
    local acked = 0
    if mine then
      for from = first, last, 1000 do
        acked = acked + redis.call('XACK', stream, group,
          unpack(ARGV, from, math.min(from + 999, last)))
      end
    end
    local outputs = tonumber(ARGV[a])
    a = a + 1
    for _ = 1, outputs do
      local target, cap, fields = KEYS[tonumber(ARGV[a])], ARGV[a + 1], tonumber(ARGV[a + 2])
      local from, to = a + 3, a + 2 + 2 * fields
      a = to + 1
      if mine and acked > 0 then
        redis.call('XADD', target, '*', unpack(ARGV, from, to))
        if cap ~= '' then caps[target] = tonumber(cap) end
      end
    end
  end
  if mine and ids > 0 then
    for from = first_id, last_id, 1000 do
      redis.call('XACK', stream, group, unpack(ARGV, from, math.min(from + 999, last_id)))
    end
  end
  k = k + 2 + 2 * tables
end
for target, cap in pairs(caps) do
  local length = redis.call('XLEN', target)
  if length > cap + slack(cap) then
    trim(target, (spare(target, length - cap)), false)
  end
end
return lost
