-- Holding partition streams to their size (partition_size): the first part of the append
-- scripts (append.lua, append_at.lua, append_identified.lua), which call these functions.
--
-- A stream longer than its cap plus a slack (1 %, between 1 and 1,000 entries: trimming
-- looks at the entries it removes, so it is paid once per that many appends) is trimmed
-- back to the cap from its oldest entry. By default no further than every consumer group
-- has acknowledged: entries before a group's oldest pending entry, or up to its last
-- delivered one when nothing is pending. If the new entries would not fit after that, the
-- append is refused and names the group holding the oldest entry still needed (the
-- sender waits). With 'drop' the cap wins; entries a group had not read yet are counted
-- in the stream's lost hash (field: the group) and its last delivered id moves past
-- them, so that its lag does not count them for ever.

local function older(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  if #am ~= #bm then return #am < #bm end
  if am ~= bm then return am < bm end
  if #as ~= #bs then return #as < #bs end
  return as < bs
end

local function slack(cap)
  return math.max(1, math.min(1000, math.floor(cap / 100)))
end

local function groups_of(key)
  local out = {}
  for _, flat in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local info = {}
    for i = 1, #flat, 2 do info[flat[i]] = flat[i + 1] end
    out[#out + 1] = info
  end
  return out
end

-- How many of the `want` oldest entries every group has acknowledged, and the group that
-- has acknowledged the fewest (false when there is no group: nothing is needed).
local function spare(key, want)
  if redis.call('EXISTS', key) == 0 then return want, false end
  local bound, open, slowest = false, false, false
  for _, g in ipairs(groups_of(key)) do
    local at, excl = g['last-delivered-id'], false
    if tonumber(g['pending']) > 0 then
      at, excl = redis.call('XPENDING', key, g['name'])[2], true
    end
    if not bound or older(at, bound) or (at == bound and excl and not open) then
      bound, open, slowest = at, excl, g['name']
    end
  end
  if not bound then return want, false end
  if open then bound = '(' .. bound end
  return #redis.call('XRANGE', key, '-', bound, 'COUNT', want), slowest
end

-- Before appending `adding` entries to `key`: how many oldest entries to trim after, or
-- false and the group that keeps them from fitting.
local function room(key, adding, cap, drop)
  local length = redis.call('XLEN', key)
  local total = length + adding
  if total <= cap + slack(cap) then return 0 end
  if drop then return total - cap end
  local free, slowest = spare(key, total - cap)
  if slowest and total - free > cap + slack(cap) then return false, slowest end
  return free
end

-- Trim the `count` oldest entries of `key`, counting in `lost` what groups never read.
local function trim(key, count, lost)
  if count <= 0 then return end
  if lost then
    local last = redis.call('XRANGE', key, '-', '+', 'COUNT', count)
    last = last[#last][1]
    for _, g in ipairs(groups_of(key)) do
      local delivered = g['last-delivered-id']
      if older(delivered, last) then
        local unread = #redis.call('XRANGE', key, '(' .. delivered, last)
        if type(g['entries-read']) == 'number' then
          redis.call('XGROUP', 'SETID', key, g['name'], last,
            'ENTRIESREAD', g['entries-read'] + unread)
        else
          redis.call('XGROUP', 'SETID', key, g['name'], last)
        end
        if unread > 0 then redis.call('HINCRBY', lost, g['name'], unread) end
      end
    end
  end
  redis.call('XTRIM', key, 'MAXLEN', '=', redis.call('XLEN', key) - count)
end

-- Per stream (its index in KEYS): how many entries the ARGV entries from `first` on add,
-- each entry being its stream's index, then `skip` values, then its field count and pairs.
local function adding_per_stream(first, skip)
  local adding = {}
  local i = first
  while i <= #ARGV do
    local n = tonumber(ARGV[i])
    adding[n] = (adding[n] or 0) + 1
    i = i + 2 + skip + 2 * tonumber(ARGV[i + 1 + skip])
  end
  return adding
end

-- The plan for the streams given how many entries each takes (by index in KEYS), or an
-- error reply naming the first that is full.
local function plan_for(adding)
  local cap, drop = ARGV[1], ARGV[2] == 'drop'
  local trims = {}
  if cap == '' then return trims end
  cap = tonumber(cap)
  for n, count in pairs(adding) do
    if count > 0 then
      local trim_count, slowest = room(KEYS[n], count, cap, drop)
      if not trim_count then
        return nil, redis.error_reply('RUNNELFULL ' .. n .. ' ' .. slowest)
      end
      trims[n] = trim_count
    end
  end
  return trims
end

-- The plan for every stream of the ARGV entries from `first` on (see adding_per_stream).
local function plan(streams, first, skip)
  return plan_for(adding_per_stream(first, skip))
end

local function trim_all(streams, trims)
  local drop = ARGV[2] == 'drop'
  for n, count in pairs(trims) do
    trim(KEYS[n], count, drop and KEYS[streams + n])
  end
end

