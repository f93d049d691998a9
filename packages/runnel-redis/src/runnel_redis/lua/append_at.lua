-- append.lua with explicit ids (send(..., stream_ids=...)).
-- KEYS and ARGV[1], ARGV[2] as append.lua; ARGV[2 + n]: the first explicit id going to
-- stream n (empty if none); then per entry: its stream's index in KEYS, its id ("*" or a
-- canonical "MS-SEQ"), its number of fields, its fields and values. The caller has checked
-- that a stream's ids rise and that none follows a "*"; so if each first id is above its
-- stream's last generated id, every XADD succeeds. Otherwise appends none and replies
-- IDORDER.
local streams = ARGV[2] == 'drop' and #KEYS / 2 or #KEYS
for n = 1, streams do
  local key = KEYS[n]
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'stream' and kind ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. kind .. ', not a stream')
  end
  local first = ARGV[n + 2]
  if first ~= '' and kind == 'stream' then
    local info = redis.call('XINFO', 'STREAM', key)
    for i = 1, #info, 2 do
      if info[i] == 'last-generated-id' and not older(info[i + 1], first) then
        return redis.error_reply('IDORDER entry id ' .. first .. ' is not above '
          .. info[i + 1] .. ', the last id of ' .. key)
      end
    end
  end
end
local trims, refused = plan(streams, streams + 3, 1)
if not trims then return refused end
local ids = {}
local i = streams + 3
local last = #ARGV
while i <= last do
  local args = {'XADD', KEYS[tonumber(ARGV[i])], ARGV[i + 1]}
  local stop = i + 2 + 2 * tonumber(ARGV[i + 2])
  for j = i + 3, stop do
    args[#args + 1] = ARGV[j]
  end
  ids[#ids + 1] = redis.call(unpack(args))
  i = stop + 1
end
trim_all(streams, trims)
return ids
