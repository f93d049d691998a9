-- Enqueue a workflow whole (job_workflow.lua): its hash, every job's hash (status
-- WAITING, naming the workflow and the jobs waiting for it), then the jobs that wait for
-- nothing onto their queues. Nothing is stored if the workflow or one job exists; a
-- workflow stored by the same call (sent again: its reply was lost) answers 1 again.
-- KEYS[1] the set of named queues, KEYS[2] the workflows index (wid by created),
-- KEYS[3] the workflow's hash.
-- ARGV[1] key prefix, ARGV[2] workflow id, ARGV[3] created (ms), ARGV[4] shape,
-- ARGV[5] result (JSON), ARGV[6] the call's identity ('' = none), then 9 values per
-- job: id, payload, name, codec, retries, queue ('' = the default one), waits
-- (predecessors to wait for), then (ids waiting for it, by spaces), the error handler
-- (1|0).
-- Returns 1 if stored (by this call), 0 if not.
local prefix, wid, created, call = ARGV[1], ARGV[2], ARGV[3], ARGV[6]
if redis.call('EXISTS', KEYS[3]) == 1 then
  if call ~= '' and redis.call('HGET', KEYS[3], 'call') == call then return 1 end
  return 0
end
for i = 7, #ARGV, 9 do
  if redis.call('EXISTS', prefix .. 'job.' .. ARGV[i]) == 1 then return 0 end
end
local members, ready, left, handler = {}, {}, 0, ''
for i = 7, #ARGV, 9 do
  local id, queue, waits = ARGV[i], ARGV[i + 5], tonumber(ARGV[i + 6])
  local key = prefix .. 'job.' .. id
  redis.call('HSET', key, 'name', ARGV[i + 2], 'status', 'WAITING', 'payload', ARGV[i + 1],
    'codec', ARGV[i + 3], 'retries', ARGV[i + 4], 'results', 1, 'tries', 0,
    'created', created, 'wf', wid)
  if queue ~= '' then
    redis.call('HSET', key, 'queue', queue)
    redis.call('SADD', KEYS[1], queue)
  end
  if ARGV[i + 7] ~= '' then redis.call('HSET', key, 'then', ARGV[i + 7]) end
  members[#members + 1] = id
  if ARGV[i + 8] == '1' then
    handler = id
  else
    left = left + 1
    if waits > 0 then
      redis.call('HSET', KEYS[3], 'wait.' .. id, waits)
    else
      ready[#ready + 1] = id
    end
  end
end
redis.call('HSET', KEYS[3], 'status', 'RUNNING', 'shape', ARGV[4], 'created', created,
  'members', table.concat(members, ' '), 'result', ARGV[5], 'left', left, 'onerror', handler)
if call ~= '' then redis.call('HSET', KEYS[3], 'call', call) end
redis.call('ZADD', KEYS[2], created, wid)
for _, id in ipairs(ready) do wf_release(prefix, id) end
return 1
