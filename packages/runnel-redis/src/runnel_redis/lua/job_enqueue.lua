-- Enqueue jobs: each onto the queue, or onto the schedule when it is due later; status SENT.
-- A job whose id exists already (in any status) is left as it is. The job names its queue
-- entry (field entry), so that a cancel can delete it.
-- KEYS[1] queue stream, KEYS[2] schedule.
-- ARGV[1] key prefix (__jobs:{app}.), then 8 values per job:
--   id, payload, created (ms), due (ms; '' = now), name, codec, retries, results (1|0)
-- Returns 1 per job enqueued, 0 per job that existed.
local prefix = ARGV[1]
local out = {}
for i = 2, #ARGV, 8 do
  local id = ARGV[i]
  local key = prefix .. 'job.' .. id
  if redis.call('EXISTS', key) == 1 then
    out[#out + 1] = 0
  else
    local due = ARGV[i + 3]
    local where, at = 'due', due
    if due == '' then
      where, at = 'entry', redis.call('XADD', KEYS[1], '*', 'id', id)
    else
      redis.call('ZADD', KEYS[2], due, id)
    end
    redis.call('HSET', key, 'name', ARGV[i + 4], 'status', 'SENT', 'payload', ARGV[i + 1],
      'codec', ARGV[i + 5], 'retries', ARGV[i + 6], 'results', ARGV[i + 7], 'tries', 0,
      'created', ARGV[i + 2], where, at)
    out[#out + 1] = 1
  end
end
return out
