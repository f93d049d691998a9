-- What a partition remembers of appends with identities (runnel.store.identity): the
-- functions append_identified.lua calls. Per partition, keys named by the key layout:
--
-- meta: a hash, never expiring: 'g' the current generation (0 or 1) and when it began
--   (ms), as 'GEN MS'; 'd' duplicates dropped so far; 'c' the cursor of the producers'
--   pruning.
-- generations 0 and 1: hashes of call identities ('c' .. producer .. ':' .. number ->
--   'first last count', the ids of the call's entries) and application keys ('k' .. key
--   -> the entry's id). New ones go to the current generation; when it holds half the
--   window's keys, or began half the window ago, the other one is deleted and becomes
--   the current one. Each expires (PEXPIREAT) the window after it began, so a key is
--   remembered from half the window to the whole of it, and idle state goes by itself.
-- producers: a hash, producer -> 'hwm expires first last count low high': its highest
--   number taken, when it is forgotten (the window after its last call), and its last
--   append's ids, count and numbers; the key expires the window after its last write,
--   and each new producer prunes a few forgotten ones (HSCAN from the cursor in meta).

local function clock_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function decimal(n)
  return string.format('%.0f', n)
end

-- The generations of a partition: {meta, cur, prev, gen, start, changed}.
local function generations(meta, g0, g1)
  local gen, start = string.match(redis.call('HGET', meta, 'g') or '', '^(%d) (%d+)$')
  gen = gen == '1' and 1 or 0
  local s = {meta = meta, gen = gen, start = tonumber(start) or 0, changed = false}
  if gen == 0 then s.cur, s.prev = g0, g1 else s.cur, s.prev = g1, g0 end
  return s
end

-- The values of `fields` in either generation (false where neither has one).
local function recall(s, fields)
  local found = {}
  for first = 1, #fields, 1000 do
    local last = math.min(#fields, first + 999)
    local chunk = {unpack(fields, first, last)}
    local cur = redis.call('HMGET', s.cur, unpack(chunk))
    local prev = redis.call('HMGET', s.prev, unpack(chunk))
    for j = 1, #chunk do
      found[first + j - 1] = cur[j] or prev[j]
    end
  end
  return found
end

-- Keep `flat` (field, value, field, value, ...) in the current generation, starting a
-- new one (the older forgotten) when it is full or old.
local function remember(s, flat, now, window, half)
  if #flat == 0 then return end
  local count = redis.call('HLEN', s.cur)
  local i = 1
  while i <= #flat do
    if count == 0 then
      s.start, s.changed = now, true
    elseif count >= half or now - s.start >= window / 2 then
      redis.call('DEL', s.prev)
      s.cur, s.prev = s.prev, s.cur
      s.gen, s.start, s.changed, count = 1 - s.gen, now, true, 0
    end
    local take = math.min((#flat - i + 1) / 2, half - count, 500)
    local stop = i + 2 * take - 1
    redis.call('HSET', s.cur, unpack(flat, i, stop))
    if count == 0 then
      redis.call('PEXPIREAT', s.cur, decimal(s.start + window))
    end
    count = count + take
    i = stop + 1
  end
  if s.changed then
    redis.call('HSET', s.meta, 'g', s.gen .. ' ' .. decimal(s.start))
  end
end

-- The ids of an append's `count` entries from `first` to `last` still in `key`, those
-- trimmed since (the oldest) as '0-0', fitted to `wanted`.
local function between(key, first, last, count, wanted)
  local there = redis.call('XRANGE', key, first, last, 'COUNT', count)
  local ids = {}
  for _ = 1, count - #there do ids[#ids + 1] = '0-0' end
  for _, entry in ipairs(there) do ids[#ids + 1] = entry[1] end
  local out = {}
  for j = 1, wanted do out[j] = ids[j] or '0-0' end
  return out
end

-- A producer's state ('hwm expires first last count low high') as a table, or nil if
-- there is none or it is forgotten.
local function producer_state(hash, producer, now)
  local raw = redis.call('HGET', hash, producer)
  if not raw then return nil end
  local hwm, expires, first, last, count, low, high =
    string.match(raw, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
  if not hwm or tonumber(expires) <= now then return nil end
  return {hwm = hwm, expires = expires, first = first, last = last, count = tonumber(count),
    low = low, high = high}
end

local function producer_text(p)
  return table.concat({p.hwm, p.expires, p.first, p.last, p.count, p.low, p.high}, ' ')
end

-- Delete a few forgotten producers, from the cursor kept in `meta`.
local function prune(meta, hash, now)
  local page = redis.call('HSCAN', hash, redis.call('HGET', meta, 'c') or '0', 'COUNT', 20)
  local flat = page[2]
  for j = 1, #flat, 2 do
    local expires = tonumber(string.match(flat[j + 1], '^%S+ (%S+)'))
    if expires and expires <= now then redis.call('HDEL', hash, flat[j]) end
  end
  redis.call('HSET', meta, 'c', page[1])
end
