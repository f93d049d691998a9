-- KEYS[1]: the admin lock. ARGV: token, ttl_ms. SET NX PX, allowed when Redis is full.
-- Sent after the flags line '#!lua flags=allow-oom' (scripts.ALLOW_OOM).

return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
