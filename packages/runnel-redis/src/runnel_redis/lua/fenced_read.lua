-- KEYS: n locks, then their n streams. ARGV: owner, group, consumer, count, then the n
-- read positions. XREADGROUP on the streams whose lock we hold; returns {held flags,
-- reply}. The read for a full Redis, which refuses every command queued in MULTI (see
-- RedisCoordination.read); slower, as the entries pass through Lua.
-- Sent after the flags line '#!lua flags=allow-oom' (scripts.ALLOW_OOM).

local n = #KEYS / 2
local held = {}
local args = {'XREADGROUP', 'GROUP', ARGV[2], ARGV[3], 'COUNT', ARGV[4], 'STREAMS'}
local ids = {}
local holders = redis.call('MGET', unpack(KEYS, 1, n))
for i = 1, n do
  if holders[i] == ARGV[1] then
    held[i] = 1
    args[#args + 1] = KEYS[n + i]
    ids[#ids + 1] = ARGV[4 + i]
  else
    held[i] = 0
  end
end
if #ids == 0 then
  return {held, false}
end
for _, id in ipairs(ids) do
  args[#args + 1] = id
end
return {held, redis.call(unpack(args))}
