-- KEYS[1]: a heartbeat. ARGV: owner, ttl_ms. beat.lua's first half, for a cluster (allowed
-- when Redis is full, like beat.lua).
-- Sent after the flags line '#!lua flags=allow-oom' (scripts.ALLOW_OOM).

return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
