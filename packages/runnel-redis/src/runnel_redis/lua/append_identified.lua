-- append.lua for an append with an identity (runnel.store.identity; state: identities.lua):
-- what each partition took already under it is not appended again, and is replied with
-- its original ids ('0-0' where no longer known). The room check counts only the rest.
-- KEYS: the S streams; with 'drop', their S lost hashes; then each stream's identity
-- state in the same order: its meta hash, then its two generations (kinds 'c' and 'k')
-- or its producers hash (kind 's').
-- ARGV[1], ARGV[2] as append.lua; ARGV[3] S; ARGV[4] the kind: 'c' (one call: ARGV[7] is
-- its field), 's' (numbered records: ARGV[7] is the producer) or 'k' (keyed records);
-- ARGV[5] the window (ms); ARGV[6] the keys a generation holds; then per entry: its
-- stream's index in KEYS, (kinds 's' and 'k') its number or 'k' .. its key ('' for none),
-- its number of fields, its fields and values.
-- Reply: the entries' ids in order, then how many were duplicates. Refusals as append.lua.
local streams = tonumber(ARGV[3])
local kind, window, half, ident = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local width = kind == 's' and 2 or 3
local base = ARGV[2] == 'drop' and 2 * streams or streams
for n = 1, streams do
  local type_of = redis.call('TYPE', KEYS[n])['ok']
  if type_of ~= 'stream' and type_of ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. KEYS[n] .. ' holds a ' .. type_of .. ', not a stream')
  end
end
local now = clock_ms()

-- The entries: their stream, identity and where their fields start, by stream.
local skip = kind == 'c' and 0 or 1
local at, marks, members = {}, {}, {}
local i = 8
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local e = #at + 1
  at[e], marks[e] = i + 1 + skip, skip == 1 and ARGV[i + 1] or false
  members[n] = members[n] or {}
  table.insert(members[n], e)
  i = i + 2 + skip + 2 * tonumber(ARGV[i + 1 + skip])
end

local function state(n, j)
  return KEYS[base + (n - 1) * width + j]
end

-- Which entries are in already, and their replies: an id, or the entry whose id it takes.
local replies, adding, gens, producers = {}, {}, {}, {}
for n, list in pairs(members) do
  local new = 0
  if kind == 'c' then
    gens[n] = generations(state(n, 1), state(n, 2), state(n, 3))
    local stored = recall(gens[n], {ident})[1]
    if stored then
      local first, last, count = string.match(stored, '^(%S+) (%S+) (%S+)$')
      local ids = between(KEYS[n], first, last, tonumber(count), #list)
      for j, e in ipairs(list) do replies[e] = ids[j] end
    else
      new = #list
    end
  elseif kind == 's' then
    local p = producer_state(state(n, 2), ident, now)
    producers[n] = p
    local hwm = p and tonumber(p.hwm) or -1
    local last_ones = {}
    for _, e in ipairs(list) do
      local seq = tonumber(marks[e])
      if seq > hwm then
        new = new + 1
      else
        replies[e] = '0-0'
        if seq >= tonumber(p.low) and seq <= tonumber(p.high) then
          last_ones[#last_ones + 1] = e
        end
      end
    end
    if #last_ones > 0 and #last_ones == p.count then
      local ids = between(KEYS[n], p.first, p.last, p.count, #last_ones)
      for j, e in ipairs(last_ones) do replies[e] = ids[j] end
    end
  else
    gens[n] = generations(state(n, 1), state(n, 2), state(n, 3))
    local keyed, fields = {}, {}
    for _, e in ipairs(list) do
      if marks[e] ~= '' then
        keyed[#keyed + 1] = e
        fields[#fields + 1] = marks[e]
      end
    end
    local stored = recall(gens[n], fields)
    local first_of = {}
    for j, e in ipairs(keyed) do
      if stored[j] then
        replies[e] = stored[j]
      elseif first_of[marks[e]] then
        replies[e] = first_of[marks[e]]
      else
        first_of[marks[e]] = e
      end
    end
    for _, e in ipairs(list) do
      if not replies[e] then new = new + 1 end
    end
  end
  adding[n] = new
end

local trims, refused = plan_for(adding)
if not trims then return refused end
local ids = {}
for e = 1, #at do
  if not replies[e] then
    local start = at[e]
    local args = {'XADD', false, '*'}
    local n = tonumber(ARGV[start - 1 - skip])
    args[2] = KEYS[n]
    for j = start + 1, start + 2 * tonumber(ARGV[start]) do
      args[#args + 1] = ARGV[j]
    end
    ids[e] = redis.call(unpack(args))
  end
end
trim_all(streams, trims)

local duplicates = 0
for n, list in pairs(members) do
  local fresh, dropped = {}, 0
  for _, e in ipairs(list) do
    if replies[e] then dropped = dropped + 1 else fresh[#fresh + 1] = e end
  end
  if kind == 'c' and #fresh > 0 then
    local value = ids[fresh[1]] .. ' ' .. ids[fresh[#fresh]] .. ' ' .. #fresh
    remember(gens[n], {ident, value}, now, window, half)
  elseif kind == 'k' then
    local pairs_of = {}
    for _, e in ipairs(fresh) do
      if marks[e] ~= '' then
        pairs_of[#pairs_of + 1] = marks[e]
        pairs_of[#pairs_of + 1] = ids[e]
      end
    end
    remember(gens[n], pairs_of, now, window, half)
  elseif kind == 's' then
    local hash, p = state(n, 2), producers[n]
    local expires = decimal(now + window)
    if #fresh > 0 then
      if not p then prune(state(n, 1), hash, now) end
      p = {hwm = marks[fresh[#fresh]], first = ids[fresh[1]], last = ids[fresh[#fresh]],
        count = #fresh, low = marks[fresh[1]], high = marks[fresh[#fresh]]}
    end
    if p then
      p.expires = expires
      redis.call('HSET', hash, ident, producer_text(p))
      redis.call('PEXPIRE', hash, window)
    end
  end
  if dropped > 0 then
    redis.call('HINCRBY', state(n, 1), 'd', dropped)
    duplicates = duplicates + dropped
  end
end

local out = {}
for e = 1, #at do
  local reply = replies[e]
  if type(reply) == 'number' then reply = ids[reply] end
  out[e] = ids[e] or reply
end
out[#out + 1] = duplicates
return out
