-- Make a job waiting on the schedule (a countdown or a retry) due now, in its own queue's
-- schedule (the default one is KEYS[1]; a job of a named queue, its field queue, has that
-- queue's), so that the next promotion (job_promote.lua) queues it.
-- KEYS[1] default schedule, KEYS[2] the job's hash.
-- ARGV[1] key prefix, ARGV[2] job id, ARGV[3] now (ms).
-- Returns 1 if it was on the schedule (now due), 0 if not (nothing changed).
local queue = redis.call('HGET', KEYS[2], 'queue')
local schedule = KEYS[1]
if queue and queue ~= '' then schedule = ARGV[1] .. 'schedule.' .. queue end
if redis.call('ZREM', schedule, ARGV[2]) == 0 then return 0 end
redis.call('ZADD', schedule, ARGV[3], ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('HSET', KEYS[2], 'due', ARGV[3]) end
return 1
