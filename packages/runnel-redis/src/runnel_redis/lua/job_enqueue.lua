-- Enqueue jobs: each onto its queue, or onto its queue's schedule when it is due later;
-- status SENT. A job whose id exists already (in any status) is left as it is. The job
-- names its queue entry (field entry), so that a cancel can delete it, and the call that
-- stored it (field call), so that the same call sent again (its reply was lost) is
-- answered as the first time.
-- KEYS[1] default queue stream, KEYS[2] its schedule, KEYS[3] the set of named queues.
-- ARGV[1] key prefix (__jobs:{app}.), ARGV[2] the call's identity ('' = none), then 9
-- values per job:
--   id, payload, created (ms), due (ms; '' = now), name, codec, retries, results (1|0),
--   queue ('' = the default queue; a named one's keys are prefix .. 'queue.' .. name and
--   prefix .. 'schedule.' .. name, and its name is added to KEYS[3])
-- Returns 1 per job enqueued (by this call), 0 per job that existed.
local prefix, call = ARGV[1], ARGV[2]
local out = {}
local named = {}
for i = 3, #ARGV, 9 do
  local id = ARGV[i]
  local key = prefix .. 'job.' .. id
  if redis.call('EXISTS', key) == 1 then
    if call ~= '' and redis.call('HGET', key, 'call') == call then
      out[#out + 1] = 1
    else
      out[#out + 1] = 0
    end
  else
    local due, queue, schedule = ARGV[i + 3], KEYS[1], KEYS[2]
    local name = ARGV[i + 8]
    if name ~= '' then
      queue, schedule = prefix .. 'queue.' .. name, prefix .. 'schedule.' .. name
      if not named[name] then
        named[name] = true
        redis.call('SADD', KEYS[3], name)
      end
    end
    local where, at = 'due', due
    if due == '' then
      where, at = 'entry', redis.call('XADD', queue, '*', 'id', id)
    else
      redis.call('ZADD', schedule, due, id)
    end
    redis.call('HSET', key, 'name', ARGV[i + 4], 'status', 'SENT', 'payload', ARGV[i + 1],
      'codec', ARGV[i + 5], 'retries', ARGV[i + 6], 'results', ARGV[i + 7], 'tries', 0,
      'created', ARGV[i + 2], where, at)
    if name ~= '' then
      redis.call('HSET', key, 'queue', name)
    end
    if call ~= '' then
      redis.call('HSET', key, 'call', call)
    end
    out[#out + 1] = 1
  end
end
return out
