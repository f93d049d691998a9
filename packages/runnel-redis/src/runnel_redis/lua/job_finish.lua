-- Record how deliveries ended, each together with its removal from the queue (XACK and
-- XDEL), so the queue holds only unfinished work and no step can be half done. (The
-- deletions and the results index additions go in one command each, at the end.)
-- KEYS[1] queue stream, KEYS[2] schedule, KEYS[3] dead letters (the default queue's),
-- KEYS[4] results index, KEYS[5] totals (hash: s, r and d count the tries finished since
-- the queue began, as they end here, so that a rate read from them is exact; never
-- lowered); then the concurrency slots (held.{name}, job_limits.py) that these outcomes
-- free, if any: each outcome applied frees its ticket's field in each.
-- ARGV[1] key prefix, ARGV[2] group, ARGV[3] results ttl (ms), ARGV[4] now (ms),
-- ARGV[5] a heartbeat key that must be absent ('' for none: recovery on behalf of a
-- dead executor is refused whole if it beats again), then 6 values per outcome:
--   kind, ticket, job id, at (ms), a, b
-- A ticket is the queue entry's id, for the default queue, or 'name/entry' for an entry
-- of the named queue 'name', whose keys are prefix .. 'queue.' .. name, 'schedule.' ..
-- name and 'dead.' .. name.
--   s(uccess): a = result item ('' keeps none)
--   r(etry):   a = due (ms), b = error (JSON)
--   d(ead):    a = result item telling the failure ('' keeps none), b = error (JSON)
--   q(ueue):   back to the queue as it was (a new entry); a = '1' takes back the counted try
-- A delivery that is no longer pending (taken back, or finished already) is refused.
-- A workflow's job also updates its workflow (job_workflow.lua, in front of this one).
-- Returns the job ids refused.
local refused = {}
if ARGV[5] ~= '' and redis.call('EXISTS', ARGV[5]) == 1 then
  for i = 6, #ARGV, 6 do refused[#refused + 1] = ARGV[i + 2] end
  return refused
end
local prefix, group, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local done = {}     -- per queue stream, the entries to delete, all in one XDEL
local kept = {}     -- results index additions (score, id, ...), all in one ZADD
local ended = {s = 0, r = 0, d = 0}  -- tries finished, by kind, for the totals
for i = 6, #ARGV, 6 do
  local kind, entry, id, at, a, b =
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local queue, schedule, dead = KEYS[1], KEYS[2], KEYS[3]
  local slash = string.find(entry, '/', 1, true)
  if slash then
    local name = string.sub(entry, 1, slash - 1)
    entry = string.sub(entry, slash + 1)
    queue = prefix .. 'queue.' .. name
    schedule, dead = prefix .. 'schedule.' .. name, prefix .. 'dead.' .. name
  end
  if redis.call('XACK', queue, group, entry) == 0 then
    refused[#refused + 1] = id
  else
    local entries = done[queue]
    if not entries then
      entries = {}
      done[queue] = entries
    end
    entries[#entries + 1] = entry
    for k = 6, #KEYS do redis.call('HDEL', KEYS[k], ARGV[i + 1]) end
    local key = prefix .. 'job.' .. id
    -- A job purged while it ran is not brought back to life by its outcome. Its
    -- workflow (wf), read in the same call: a job outside one costs no more lookups.
    local job = redis.call('HMGET', key, 'name', 'wf')
    if job[1] then
      if ended[kind] then ended[kind] = ended[kind] + 1 end
      if kind == 's' then
        redis.call('HSET', key, 'status', 'SUCCESS', 'finished', at)
        redis.call('HDEL', key, 'error')  -- an earlier try's
        if a ~= '' then
          -- A fresh key: a result is stored once per job (a replay deletes the old one).
          local rkey = prefix .. 'result.' .. id
          redis.call('RPUSH', rkey, a)
          redis.call('PEXPIRE', rkey, ttl)
          kept[#kept + 1] = tonumber(at) + ttl
          kept[#kept + 1] = id
        end
        redis.call('PEXPIRE', key, ttl)
        if job[2] then wf_success(prefix, id, at, ttl) end
      elseif kind == 'r' then
        redis.call('HSET', key, 'status', 'RETRY', 'finished', at, 'error', b, 'due', a)
        redis.call('ZADD', schedule, a, id)
      elseif kind == 'd' then
        redis.call('HSET', key, 'status', 'DEAD', 'finished', at, 'error', b)
        local e = cjson.decode(b)
        local line = e['type']
        if e['message'] and e['message'] ~= '' then line = line .. ': ' .. e['message'] end
        redis.call('XADD', dead, '*', 'id', id, 'name', job[1],
          'error', line, 'at', at)
        if a ~= '' then
          local rkey = prefix .. 'result.' .. id
          redis.call('DEL', rkey)
          redis.call('RPUSH', rkey, a)
        end
        if job[2] then wf_fail(prefix, id, at, ttl, line) end
      else
        if a == '1' then
          local tries = redis.call('HINCRBY', key, 'tries', -1)
          redis.call('HSET', key, 'status', tries > 0 and 'RETRY' or 'SENT')
          redis.call('HDEL', key, 'started', 'executor')  -- of the try taken back
        end
        redis.call('HSET', key, 'entry', redis.call('XADD', queue, '*', 'id', id))
      end
    end
  end
end
-- In slices: unpack() is limited by Lua's stack.
for queue, entries in pairs(done) do
  for first = 1, #entries, 1000 do
    redis.call('XDEL', queue, unpack(entries, first, math.min(first + 999, #entries)))
  end
end
for first = 1, #kept, 1000 do
  redis.call('ZADD', KEYS[4], unpack(kept, first, math.min(first + 999, #kept)))
end
for kind, n in pairs(ended) do
  if n > 0 then redis.call('HINCRBY', KEYS[5], kind, n) end
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[4])
return refused
