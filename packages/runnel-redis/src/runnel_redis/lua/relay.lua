-- Relay outputs a cluster commit kept in a partition's outbox to the stream they go to
-- (in another slot), each once: the stream's relay hash remembers, per outbox, the last
-- entry relayed from it, and entries up to it are skipped. An outbox is relayed in order,
-- so what one partition sends to one stream arrives in the order it was committed.
-- KEYS[1]: the stream, KEYS[2]: its relay hash. ARGV[1]: the outbox, ARGV[2]: the stream's
-- cap (empty: none); then per entry: its outbox id, how many fields, the field/value pairs.
-- Returns how many entries were appended.
local stream, relayed, outbox, cap = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local done = redis.call('HGET', relayed, outbox)
local appended = 0
local last = false
local a = 3
while a <= #ARGV do
  local id, fields = ARGV[a], tonumber(ARGV[a + 1])
  local from, to = a + 2, a + 1 + 2 * fields
  a = to + 1
  if not done or older(done, id) then
    redis.call('XADD', stream, '*', unpack(ARGV, from, to))
    appended = appended + 1
    last = id
  end
end
if last then
  redis.call('HSET', relayed, outbox, last)
  if cap ~= '' then
    cap = tonumber(cap)
    local length = redis.call('XLEN', stream)
    if length > cap + slack(cap) then trim(stream, (spare(stream, length - cap)), false) end
  end
end
return appended
