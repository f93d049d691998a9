-- Append a batch of entries to partition streams, whole or not at all; return their ids.
-- KEYS: the streams, then (with 'drop') each stream's lost hash in the same order.
-- ARGV[1]: the cap (partition_size; empty: no trimming), ARGV[2]: '' (keep what a group
-- has not acknowledged; refuse if full) or 'drop'; then per entry: its stream's index in
-- KEYS, its number of fields, then its fields and values.
-- Refused (nothing appended): 'WRONGTYPE ...' if a key holds something else, 'RUNNELFULL
-- <index> <group>' if a stream is full (room.lua). Redis refuses a script's first write
-- when it is out of memory, and the first write here is an append: nothing is written.
local streams = ARGV[2] == 'drop' and #KEYS / 2 or #KEYS
for n = 1, streams do
  local kind = redis.call('TYPE', KEYS[n])['ok']
  if kind ~= 'stream' and kind ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. KEYS[n] .. ' holds a ' .. kind .. ', not a stream')
  end
end
local trims, refused = plan(streams, 3, 0)
if not trims then return refused end
local ids = {}
local i = 3
local last = #ARGV
while i <= last do
  local args = {'XADD', KEYS[tonumber(ARGV[i])], '*'}
  local stop = i + 1 + 2 * tonumber(ARGV[i + 1])
  for j = i + 2, stop do
    args[#args + 1] = ARGV[j]
  end
  ids[#ids + 1] = redis.call(unpack(args))
  i = stop + 1
end
trim_all(streams, trims)
return ids
