-- Forget an executor that holds no deliveries: its consumer in the group, its entry in the
-- registry and the cancel notices it did not read. Refused (0) while it still holds some,
-- or while it beats.
-- KEYS[1] queue stream, KEYS[2] executors registry, KEYS[3] its heartbeat key, KEYS[4] its
-- cancel notices.
-- ARGV[1] group, ARGV[2] executor, ARGV[3] '1' when it is leaving (its heartbeat goes first).
if ARGV[3] == '1' then
  redis.call('DEL', KEYS[3])
elseif redis.call('EXISTS', KEYS[3]) == 1 then
  return 0
end
local ok, pending = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if ok and #pending > 0 then
  return 0
end
redis.pcall('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
redis.call('DEL', KEYS[4])
return redis.call('HDEL', KEYS[2], ARGV[2])
