-- append.lua for an append with an identity (runnel.store.identity; state: identities.lua):
-- what each partition took already under it is not appended again, and is replied with
-- its original ids ('0-0' where no longer known). The room check counts only the rest.
-- KEYS: the S streams; with 'drop', their S lost hashes; then each stream's identity
-- state in the same order: its meta hash, then its two generations (kinds 'c' and 'k')
-- or its producers hash (kind 's').
-- ARGV[1], ARGV[2] as append.lua; ARGV[3] S; ARGV[4] the kind: 'c' (one call: ARGV[7] is
-- its field; 'n' for its first try, which no stream can have yet: only remembered), 's'
-- (numbered records: ARGV[7] is the producer) or 'k' (keyed records);
-- ARGV[5] the window (ms); ARGV[6] the keys a generation holds; then per entry: its
-- stream's index in KEYS, (kinds 's' and 'k') its number or 'k' .. its key ('' for none),
-- its number of fields, its fields and values.
-- Reply: the entries' ids in order, then how many were duplicates. Refusals as append.lua.
-- The entries are walked twice, as append.lua's room check and appends do: the first
-- walk counts what each stream takes, the second appends; the state is read and written
-- once per stream (kind 'k': once per key).
local streams = tonumber(ARGV[3])
local kind, window, half, ident = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local first_try = kind == 'n'
if first_try then kind = 'c' end
local width = kind == 's' and 2 or 3
local base = ARGV[2] == 'drop' and 2 * streams or streams
local skip = kind == 'c' and 0 or 1
local last_arg = #ARGV
for n = 1, streams do
  local type_of = redis.call('TYPE', KEYS[n])['ok']
  if type_of ~= 'stream' and type_of ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. KEYS[n] .. ' holds a ' .. type_of .. ', not a stream')
  end
end
local now = clock_ms()

local function state(n, j)
  return KEYS[base + (n - 1) * width + j]
end

-- What each stream holds of this identity already.
local gens, calls, producers, hwm, low, high = {}, {}, {}, {}, {}, {}
for n = 1, streams do
  if kind == 's' then
    local p = producer_state(state(n, 2), ident, now)
    producers[n] = p
    hwm[n] = p and tonumber(p.hwm) or -1
    low[n], high[n] = p and tonumber(p.low) or 0, p and tonumber(p.high) or -1
  else
    gens[n] = generations(state(n, 1), state(n, 2), state(n, 3))
    if kind == 'c' and not first_try then calls[n] = recall(gens[n], {ident})[1] end
  end
end

-- First walk: the entries each stream has (total) and takes (adding); kind 's': how
-- many of its duplicates are of the producer's last append there; kind 'k': the keys.
local adding, total, in_last, keyed = {}, {}, {}, {}
local e, i = 0, 8
while i <= last_arg do
  e = e + 1
  local n = tonumber(ARGV[i])
  total[n] = (total[n] or 0) + 1
  if kind == 'c' then
    if not calls[n] then adding[n] = (adding[n] or 0) + 1 end
  elseif kind == 's' then
    local seq = tonumber(ARGV[i + 1])
    if seq > hwm[n] then
      adding[n] = (adding[n] or 0) + 1
    elseif seq >= low[n] and seq <= high[n] then
      in_last[n] = (in_last[n] or 0) + 1
    end
  elseif ARGV[i + 1] ~= '' then
    local k = keyed[n]
    if not k then k = {fields = {}, entries = {}}; keyed[n] = k end
    k.fields[#k.fields + 1] = ARGV[i + 1]
    k.entries[#k.entries + 1] = e
  end
  i = i + 2 + skip + 2 * tonumber(ARGV[i + 1 + skip])
end

-- Kind 'k': which keys are in (replied with their id), or in earlier in this call
-- (replied with that entry's, given as its index).
local replies = {}
if kind == 'k' then
  for n, count in pairs(total) do
    adding[n] = count
    local k = keyed[n]
    if k then
      local stored, first_of = recall(gens[n], k.fields), {}
      for j, entry in ipairs(k.entries) do
        local key = k.fields[j]
        if stored[j] then
          replies[entry] = stored[j]
        elseif first_of[key] then
          replies[entry] = first_of[key]
        else
          first_of[key] = entry
        end
        if replies[entry] then adding[n] = adding[n] - 1 end
      end
    end
  end
end

local trims, refused = plan_for(adding)
if not trims then return refused end

-- Second walk: append what is new, reply the rest.
local out, firsts, lasts, lows, highs, dropped = {}, {}, {}, {}, {}, {}
local known, taken = {}, {}
local fresh_keys = {}
e, i = 0, 8
while i <= last_arg do
  e = e + 1
  local n = tonumber(ARGV[i])
  local mark = skip == 1 and ARGV[i + 1]
  local count_at = i + 1 + skip
  local stop = count_at + 2 * tonumber(ARGV[count_at])
  local new
  if kind == 'c' then
    new = not calls[n]
  elseif kind == 's' then
    new = tonumber(mark) > hwm[n]
  else
    new = not replies[e]
  end
  if new then
    local args = {'XADD', KEYS[n], '*'}
    for j = count_at + 1, stop do
      args[#args + 1] = ARGV[j]
    end
    local id = redis.call(unpack(args))
    out[e] = id
    if not firsts[n] then firsts[n], lows[n] = id, mark end
    lasts[n], highs[n] = id, mark
    if kind == 'k' and mark ~= '' then
      local flat = fresh_keys[n]
      if not flat then flat = {}; fresh_keys[n] = flat end
      flat[#flat + 1] = mark
      flat[#flat + 1] = id
    end
  else
    dropped[n] = (dropped[n] or 0) + 1
    local reply = '0-0'
    if kind == 'k' then
      reply = replies[e]
      if type(reply) == 'number' then reply = out[reply] end
    elseif kind == 'c' or (tonumber(mark) >= low[n] and in_last[n] == producers[n].count) then
      if not known[n] then
        local first, last, count
        if kind == 'c' then
          first, last, count = string.match(calls[n], '^(%S+) (%S+) (%S+)$')
          known[n] = between(KEYS[n], first, last, tonumber(count), total[n])
        else
          local p = producers[n]
          known[n] = between(KEYS[n], p.first, p.last, p.count, p.count)
        end
        taken[n] = 0
      end
      taken[n] = taken[n] + 1
      reply = known[n][taken[n]]
    end
    out[e] = reply
  end
  i = stop + 1
end
trim_all(streams, trims)

-- What each stream remembers of this append, and its count of duplicates.
local duplicates = 0
for n = 1, streams do
  local count = adding[n] or 0
  if kind == 'c' and count > 0 then
    remember(gens[n], {ident, firsts[n] .. ' ' .. lasts[n] .. ' ' .. count}, now, window, half)
  elseif kind == 'k' and fresh_keys[n] then
    remember(gens[n], fresh_keys[n], now, window, half)
  elseif kind == 's' and (count > 0 or producers[n]) then
    local hash, p = state(n, 2), producers[n]
    if count > 0 then
      if not p then prune(state(n, 1), hash, now) end
      p = {hwm = highs[n], first = firsts[n], last = lasts[n], count = count, low = lows[n],
        high = highs[n]}
    end
    p.expires = decimal(now + window)
    redis.call('HSET', hash, ident, producer_text(p))
    redis.call('PEXPIRE', hash, window)
  end
  if dropped[n] then
    redis.call('HINCRBY', state(n, 1), 'd', dropped[n])
    duplicates = duplicates + dropped[n]
  end
end
out[#out + 1] = duplicates
return out
