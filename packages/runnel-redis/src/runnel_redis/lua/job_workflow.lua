-- Workflows (runnel/jobs/workflow_model.py), shared by job_finish.lua, job_cancel.lua and
-- the workflow scripts (scripts.py puts it in front of each). A workflow is the hash
-- prefix .. 'workflow.' .. wid: status, shape, created, finished, members (job ids, by
-- spaces), result (JSON), left (members not done yet), onerror (the error handler's id),
-- failed, error, wait.{id} (how many predecessors a waiting job still waits for) and
-- done.{id} (a member counted done: set once, so a success recorded twice counts once).
-- A member's hash names its workflow (wf) and the jobs waiting for it (then).
-- When a workflow ends, its status goes onto the list prefix .. 'ended.' .. wid (waited
-- on with BLMOVE), and it expires with its members that ended, after the results ttl.

-- A waiting job onto its queue (status SENT), once.
local function wf_release(prefix, id)
  local key = prefix .. 'job.' .. id
  local h = redis.call('HMGET', key, 'status', 'queue')
  if h[1] ~= 'WAITING' then return end
  local stream = prefix .. 'queue'
  if h[2] and h[2] ~= '' then stream = prefix .. 'queue.' .. h[2] end
  redis.call('HSET', key, 'status', 'SENT', 'entry', redis.call('XADD', stream, '*', 'id', id))
end

-- The workflow ends: its waiting jobs are cancelled; it and its members that ended
-- expire after ttl (a DEAD one stays, as dead letters do).
local function wf_end(prefix, wid, wkey, status, now, ttl)
  redis.call('HSET', wkey, 'status', status, 'finished', now)
  redis.call('PEXPIRE', wkey, ttl)
  local cancelled = prefix .. 'cancelled'
  for id in string.gmatch(redis.call('HGET', wkey, 'members') or '', '%S+') do
    local key, rkey = prefix .. 'job.' .. id, prefix .. 'result.' .. id
    local st = redis.call('HGET', key, 'status')
    if st == 'WAITING' then
      redis.call('HSET', key, 'status', 'CANCELLED', 'finished', now)
      redis.call('DEL', rkey)
      redis.call('RPUSH', rkey, 'c')
      redis.call('ZADD', cancelled, tonumber(now) + ttl, id)
      st = 'CANCELLED'
    end
    if st == 'SUCCESS' or st == 'CANCELLED' then
      redis.call('PEXPIRE', key, ttl)
      redis.call('PEXPIRE', rkey, ttl)
    end
  end
  local ended = prefix .. 'ended.' .. wid
  redis.call('DEL', ended)
  redis.call('RPUSH', ended, status)
  redis.call('PEXPIRE', ended, ttl)
end

-- After a job's success is recorded: keep it and its result while its workflow runs;
-- count it done once; queue each job that waited for it alone; end the workflow
-- COMPLETE with its last member.
local function wf_success(prefix, id, now, ttl)
  local key = prefix .. 'job.' .. id
  local wid = redis.call('HGET', key, 'wf')
  if not wid then return end
  local wkey = prefix .. 'workflow.' .. wid
  if redis.call('HGET', wkey, 'status') ~= 'RUNNING' then return end
  redis.call('PERSIST', key)
  redis.call('PERSIST', prefix .. 'result.' .. id)
  if redis.call('HSETNX', wkey, 'done.' .. id, now) == 0 then return end
  for waiting in string.gmatch(redis.call('HGET', key, 'then') or '', '%S+') do
    if redis.call('HINCRBY', wkey, 'wait.' .. waiting, -1) == 0 then
      wf_release(prefix, waiting)
    end
  end
  if redis.call('HINCRBY', wkey, 'left', -1) == 0 then
    wf_end(prefix, wid, wkey, 'COMPLETE', now, ttl)
  end
end

-- After a job ended DEAD or was cancelled: its running workflow fails, naming it; the
-- error handler is queued, the other waiting jobs are cancelled.
local function wf_fail(prefix, id, now, ttl, line)
  local wid = redis.call('HGET', prefix .. 'job.' .. id, 'wf')
  if not wid then return end
  local wkey = prefix .. 'workflow.' .. wid
  if redis.call('HGET', wkey, 'status') ~= 'RUNNING' then return end
  local handler = redis.call('HGET', wkey, 'onerror') or ''
  if handler == id then return end
  redis.call('HSET', wkey, 'failed', id, 'error', line)
  if handler ~= '' then wf_release(prefix, handler) end
  wf_end(prefix, wid, wkey, 'FAILED', now, ttl)
end
