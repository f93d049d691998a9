-- Settle a periodic job's ticks: move its last settled tick from the value the caller read
-- to a new one (a compare-and-set) and enqueue the jobs of the ticks that run, in one step,
-- so that of the workers racing for a tick exactly one enqueues its job. The jobs go to the
-- job's own queue, each naming its entry (so that a cancel can delete it).
-- KEYS[1] ticks hash (job name -> last settled tick, ms), KEYS[2] default queue stream,
-- KEYS[3] the set of named queues.
-- ARGV[1] key prefix, ARGV[2] job name, ARGV[3] the last tick the caller read ('' = none),
-- ARGV[4] the new last tick (ms), ARGV[5] codec, ARGV[6] retries, ARGV[7] results (1|0),
-- ARGV[8] queue ('' = the default queue; a named one's stream is prefix .. 'queue.' ..
-- name), then 3 values per job: id, payload, created (ms). A job whose id exists is left
-- as it is.
-- Returns {1, new last tick} when settled, else {0, the stored last tick ('' = none)}.
local stored = redis.call('HGET', KEYS[1], ARGV[2]) or ''
if stored ~= ARGV[3] then
  return {0, stored}
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[4])
local prefix, name, queue = ARGV[1], ARGV[8], KEYS[2]
if name ~= '' then
  queue = prefix .. 'queue.' .. name
end
for i = 9, #ARGV, 3 do
  local id = ARGV[i]
  local key = prefix .. 'job.' .. id
  if redis.call('EXISTS', key) == 0 then
    redis.call('HSET', key, 'name', ARGV[2], 'status', 'SENT', 'payload', ARGV[i + 1],
      'codec', ARGV[5], 'retries', ARGV[6], 'results', ARGV[7], 'tries', 0,
      'created', ARGV[i + 2], 'entry', redis.call('XADD', queue, '*', 'id', id))
    if name ~= '' then
      redis.call('HSET', key, 'queue', name)
      redis.call('SADD', KEYS[3], name)
    end
  end
end
return {1, ARGV[4]}
