-- KEYS[1]: our heartbeat; KEYS[2..]: our locks. ARGV: owner, ttl_ms.
-- Refresh the heartbeat, extend the locks still ours; 1 = still ours.
-- Sent after the flags line '#!lua flags=allow-oom' (scripts.ALLOW_OOM).

redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local out = {}
for i = 2, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
    out[i - 1] = 1
  else
    out[i - 1] = 0
  end
end
return out
