-- KEYS[1]: a partition lock. ARGV: owner, ttl_ms. Extend it if ours; 1 = still ours. The
-- lock half of beat.lua, for a cluster, where the heartbeat and the locks are in other slots.
-- Sent after the flags line '#!lua flags=allow-oom' (scripts.ALLOW_OOM).

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
