-- Cancel a job unless it has ended, in one step: a job finishing at the same moment ends
-- either with its own outcome (recorded first: the cancel changes nothing) or CANCELLED
-- (cancelled first: its delivery is acknowledged here, so job_finish refuses the outcome).
-- Queued: its entry is deleted. Scheduled: it leaves the schedule. Running: its entry is
-- acknowledged and deleted, and its id is pushed onto the notices of the executor running
-- it, which cancels it there. All in the job's own queue: the default one's keys are
-- KEYS[1] and KEYS[2]; a job of a named queue (its field queue) has those of that queue.
-- KEYS[1] default queue stream, KEYS[2] default schedule, KEYS[3] cancelled index,
-- KEYS[4] the job's hash.
-- ARGV[1] key prefix, ARGV[2] group, ARGV[3] job id, ARGV[4] now (ms), ARGV[5] ttl (ms).
-- A workflow's job fails its workflow (job_workflow.lua, in front of this one).
-- Returns the status the job had ('UNKNOWN' if there is none).
local h = redis.call('HMGET', KEYS[4], 'status', 'entry', 'executor', 'results', 'queue',
  'name')
local status = h[1]
if not status then return 'UNKNOWN' end
if status == 'SUCCESS' or status == 'DEAD' or status == 'CANCELLED' then return status end
local prefix, id, now, ttl = ARGV[1], ARGV[3], ARGV[4], tonumber(ARGV[5])
local queue, schedule = KEYS[1], KEYS[2]
if h[5] and h[5] ~= '' then
  queue, schedule = prefix .. 'queue.' .. h[5], prefix .. 'schedule.' .. h[5]
end
redis.call('ZREM', schedule, id)
if h[2] then
  local held = redis.call('XACK', queue, ARGV[2], h[2])
  redis.call('XDEL', queue, h[2])
  if held == 1 and status == 'EXECUTING' and h[3] then
    -- A concurrency slot it may hold (job_admit.lua) is free again.
    local ticket = (h[5] and h[5] ~= '') and (h[5] .. '/' .. h[2]) or h[2]
    redis.call('HDEL', prefix .. 'held.' .. h[6], ticket)
    local notices = prefix .. 'cancel.' .. h[3]
    redis.call('RPUSH', notices, id)
    redis.call('PEXPIRE', notices, 86400000)  -- a day, should the executor never read them
  end
end
redis.call('HSET', KEYS[4], 'status', 'CANCELLED', 'finished', now)
redis.call('HDEL', KEYS[4], 'due', 'entry')
redis.call('PEXPIRE', KEYS[4], ttl)
if h[4] == '1' then
  local rkey = prefix .. 'result.' .. id
  redis.call('DEL', rkey)
  redis.call('RPUSH', rkey, 'c')
  redis.call('PEXPIRE', rkey, ttl)
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZADD', KEYS[3], tonumber(now) + ttl, id)
wf_fail(prefix, id, now, ttl, 'JobCancelled: the job was cancelled')
return status
