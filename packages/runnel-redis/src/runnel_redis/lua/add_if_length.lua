-- KEYS[1]: a stream's schemas hash. ARGV: the number of fields the caller read, a
-- fingerprint, a schema. Add it only if the hash still has that many fields (schemas are
-- only ever added, so an equal count means nothing changed since the caller checked).

if redis.call('HLEN', KEYS[1]) ~= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[3])
return 1
