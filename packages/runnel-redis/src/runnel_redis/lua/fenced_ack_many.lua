-- KEYS: n locks, then their n streams. ARGV: owner, group, then per stream the number of
-- its ids and the ids. Acknowledge on each stream only if we hold its lock; return the
-- 1-based indexes of those we do not hold. (The locks are read with one MGET, and the ids
-- go to XACK straight from ARGV, in slices of at most 1000: a script pays for every
-- redis.call, and for every value it copies.)

local n = #KEYS / 2
local holders = redis.call('MGET', unpack(KEYS, 1, n))
local lost = {}
local at = 3
for i = 1, n do
  local count = tonumber(ARGV[at])
  local last = at + count
  if holders[i] ~= ARGV[1] then
    lost[#lost + 1] = i
  else
    for first = at + 1, last, 1000 do
      redis.call('XACK', KEYS[n + i], ARGV[2], unpack(ARGV, first, math.min(first + 999, last)))
    end
  end
  at = last + 1
end
return lost
