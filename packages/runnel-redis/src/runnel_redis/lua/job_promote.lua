-- Move jobs that are due from the schedules onto their queues (their status stays: SENT
-- for a countdown, RETRY for a retry): the default queue's, then each named queue's. Each
-- job names its new queue entry, so that a cancel can delete it.
-- KEYS[1] default schedule, KEYS[2] default queue stream, KEYS[3] the set of named queues.
-- ARGV[1] key prefix, ARGV[2] now (ms), ARGV[3] limit (in all).
-- Returns how many were due (moved, or dropped from the schedule if purged meanwhile).
local prefix, now = ARGV[1], ARGV[2]
local left = tonumber(ARGV[3])
local function promote(schedule, queue)
  local due = redis.call('ZRANGEBYSCORE', schedule, '-inf', now, 'LIMIT', 0, left)
  for _, id in ipairs(due) do
    redis.call('ZREM', schedule, id)
    local key = prefix .. 'job.' .. id
    if redis.call('EXISTS', key) == 1 then
      redis.call('HDEL', key, 'due')
      redis.call('HSET', key, 'entry', redis.call('XADD', queue, '*', 'id', id))
    end
  end
  left = left - #due
end
promote(KEYS[1], KEYS[2])
for _, name in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  if left <= 0 then break end
  promote(prefix .. 'schedule.' .. name, prefix .. 'queue.' .. name)
end
return tonumber(ARGV[3]) - left
