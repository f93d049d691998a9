-- Keep a running job's progress, only while the executor still runs that try of it: a
-- job cancelled or taken back keeps what it had, and a purged job is not brought back.
-- KEYS[1] the job's hash. ARGV[1] executor, ARGV[2] the try (tries), ARGV[3] progress (JSON).
-- Returns 1 if kept, 0 if not.
local h = redis.call('HMGET', KEYS[1], 'status', 'executor', 'tries')
if h[1] ~= 'EXECUTING' or h[2] ~= ARGV[1] or h[3] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'progress', ARGV[3])
return 1
