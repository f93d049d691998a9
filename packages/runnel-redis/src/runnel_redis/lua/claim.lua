-- KEYS[1]: leader key. ARGV: candidate, ttl_ms. Take it if free, keep it if ours.
-- Sent after the flags line '#!lua flags=allow-oom' (scripts.ALLOW_OOM).

local holder = redis.call('GET', KEYS[1])
if holder == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
elseif holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
