-- KEYS: partition locks. ARGV: owner. Returns held[i] = 1 or 0 per lock. Runs between
-- WATCH on the locks and the MULTI/EXEC that reads their partitions (see
-- RedisCoordination.read). The locks are read with one MGET: a script pays for every
-- redis.call, and this runs once per read. Every lock that is not ours is touched, so
-- that Redis refuses the transaction: one another executor holds gets its expiry set
-- again to what is left of it (value kept); a free one is set and deleted again. If
-- Redis refuses that SET (out of memory on a server without script flags), the read of
-- a free partition goes ahead: harmless, as what it delivers stays pending in the group,
-- and whoever takes the partition next reads its pending entries first (the reply
-- reports it lost, and its entries are dropped).
-- Sent after the flags line '#!lua flags=allow-oom' (scripts.ALLOW_OOM).

local holders = redis.call('MGET', unpack(KEYS))
local held = {}
for i, holder in ipairs(holders) do
  if holder == ARGV[1] then
    held[i] = 1
  else
    held[i] = 0
    local lock = KEYS[i]
    if holder then
      local left = redis.call('PTTL', lock)
      if left > 0 then
        redis.call('PEXPIRE', lock, left)
      else
        redis.call('SET', lock, holder, 'KEEPTTL')
      end
    else
      redis.pcall('SET', lock, '')
      redis.call('DEL', lock)
    end
  end
end
return held
