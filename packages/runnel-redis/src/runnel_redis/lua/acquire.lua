-- KEYS: partition locks. ARGV: owner, ttl_ms. Take free locks, refresh ours; 1 = ours.
-- Sent after the flags line '#!lua flags=allow-oom' (scripts.ALLOW_OOM).

local out = {}
for i, key in ipairs(KEYS) do
  local holder = redis.call('GET', key)
  if holder == false then
    redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
    out[i] = 1
  elseif holder == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
