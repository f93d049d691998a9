-- Settle a periodic job's ticks: move its last settled tick from the value the caller read
-- to a new one (a compare-and-set) and enqueue the jobs of the ticks that run, in one step,
-- so that of the workers racing for a tick exactly one enqueues its job.
-- KEYS[1] ticks hash (job name -> last settled tick, ms), KEYS[2] queue stream.
-- ARGV[1] key prefix, ARGV[2] job name, ARGV[3] the last tick the caller read ('' = none),
-- ARGV[4] the new last tick (ms), ARGV[5] codec, ARGV[6] retries, ARGV[7] results (1|0),
-- then 3 values per job: id, payload, created (ms). A job whose id exists is left as it is.
-- Returns {1, new last tick} when settled, else {0, the stored last tick ('' = none)}.
local stored = redis.call('HGET', KEYS[1], ARGV[2]) or ''
if stored ~= ARGV[3] then
  return {0, stored}
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[4])
for i = 8, #ARGV, 3 do
  local id = ARGV[i]
  local key = ARGV[1] .. 'job.' .. id
  if redis.call('EXISTS', key) == 0 then
    redis.call('HSET', key, 'name', ARGV[2], 'status', 'SENT', 'payload', ARGV[i + 1],
      'codec', ARGV[5], 'retries', ARGV[6], 'results', ARGV[7], 'tries', 0,
      'created', ARGV[i + 2])
    -- its queue entry named in the job, so that a cancel can delete it
    redis.call('HSET', key, 'entry', redis.call('XADD', KEYS[2], '*', 'id', id))
  end
end
return {1, ARGV[4]}
