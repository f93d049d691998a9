-- Cancel a running workflow (job_workflow.lua): status CANCELLED, its waiting jobs (the
-- error handler too) cancelled; the caller then cancels its queued and running jobs one
-- by one (job_cancel.lua), which no longer release or fail anything.
-- KEYS[1] the workflow's hash.
-- ARGV[1] key prefix, ARGV[2] workflow id, ARGV[3] now (ms), ARGV[4] ttl (ms).
-- Returns {the status it had ('UNKNOWN' if none), its members (ids by spaces)}.
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'UNKNOWN', ''} end
if status ~= 'RUNNING' then return {status, ''} end
wf_end(ARGV[1], ARGV[2], KEYS[1], 'CANCELLED', ARGV[3], tonumber(ARGV[4]))
return {status, redis.call('HGET', KEYS[1], 'members')}
