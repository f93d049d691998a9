-- KEYS: n locks, then their n streams. ARGV: owner, group, then per stream the number of
-- its ids and the ids. Acknowledge on each stream only if we hold its lock; return the
-- 1-based indexes of those we do not hold. (The ids go to XACK straight from ARGV, in
-- slices of at most 1000: no parsing or copying in Lua.)

local n = #KEYS / 2
local lost = {}
local at = 3
for i = 1, n do
  local count = tonumber(ARGV[at])
  local last = at + count
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    lost[#lost + 1] = i
  else
    for first = at + 1, last, 1000 do
      redis.call('XACK', KEYS[n + i], ARGV[2], unpack(ARGV, first, math.min(first + 999, last)))
    end
  end
  at = last + 1
end
return lost
