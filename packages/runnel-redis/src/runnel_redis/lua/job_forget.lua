-- Forget an executor that holds no deliveries: its consumer in the group of every queue,
-- its entry in the registry and the cancel notices it did not read. Refused (0) while it
-- still holds some, or while it beats.
-- KEYS[1] default queue stream, KEYS[2] executors registry, KEYS[3] its heartbeat key,
-- KEYS[4] the set of named queues, KEYS[5] its cancel notices.
-- ARGV[1] group, ARGV[2] executor, ARGV[3] '1' when it is leaving (its heartbeat goes
-- first), ARGV[4] key prefix.
if ARGV[3] == '1' then
  redis.call('DEL', KEYS[3])
elseif redis.call('EXISTS', KEYS[3]) == 1 then
  return 0
end
local queues = {KEYS[1]}
for _, name in ipairs(redis.call('SMEMBERS', KEYS[4])) do
  queues[#queues + 1] = ARGV[4] .. 'queue.' .. name
end
for _, queue in ipairs(queues) do
  local ok, pending = pcall(redis.call, 'XPENDING', queue, ARGV[1], '-', '+', 1, ARGV[2])
  if ok and #pending > 0 then
    return 0
  end
end
for _, queue in ipairs(queues) do
  redis.pcall('XGROUP', 'DELCONSUMER', queue, ARGV[1], ARGV[2])
end
redis.call('DEL', KEYS[5])
return redis.call('HDEL', KEYS[2], ARGV[2])
