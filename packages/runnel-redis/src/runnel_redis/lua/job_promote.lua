-- Move jobs that are due from the schedule onto the queue (their status stays: SENT for a
-- countdown, RETRY for a retry); each job names its new queue entry.
-- KEYS[1] schedule, KEYS[2] queue stream. ARGV[1] key prefix, ARGV[2] now (ms), ARGV[3] limit.
-- Returns how many were due (moved, or dropped from the schedule if purged meanwhile).
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, ARGV[3])
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  local key = ARGV[1] .. 'job.' .. id
  if redis.call('EXISTS', key) == 1 then
    redis.call('HDEL', key, 'due')
    redis.call('HSET', key, 'entry', redis.call('XADD', KEYS[2], '*', 'id', id))
  end
end
return #due
