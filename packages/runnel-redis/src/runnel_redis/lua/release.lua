-- KEYS: locks (or any compare-and-delete keys). ARGV: owner. Delete only what we hold.

local n = 0
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('DEL', key)
    n = n + 1
  end
end
return n
