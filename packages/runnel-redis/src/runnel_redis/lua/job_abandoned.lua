-- The deliveries an executor still holds, in the default queue and then each named one,
-- with what recovery needs to know of each job. An entry already gone from its stream is
-- acknowledged here (nothing to recover).
-- KEYS[1] default queue stream, KEYS[2] the set of named queues.
-- ARGV[1] key prefix, ARGV[2] group, ARGV[3] executor, ARGV[4] limit (in all).
-- Returns 8 values per delivery:
--   ticket ('name/entry' in a named queue), id, name, status, started (1 if it was running
--   there), tries, retries, results
local prefix, group, executor = ARGV[1], ARGV[2], ARGV[3]
local left = tonumber(ARGV[4])
local out = {}
local function held(queue, name)
  local ok, pending = pcall(redis.call, 'XPENDING', queue, group, '-', '+', left, executor)
  if not ok then return end
  for _, p in ipairs(pending) do
    local entry = p[1]
    local found = redis.call('XRANGE', queue, entry, entry)
    local id = false
    if found[1] then
      local fields = found[1][2]
      for j = 1, #fields, 2 do
        if fields[j] == 'id' then id = fields[j + 1] end
      end
    end
    if not id then
      redis.call('XACK', queue, group, entry)
    else
      local h = redis.call('HMGET', prefix .. 'job.' .. id,
        'name', 'status', 'executor', 'tries', 'retries', 'results')
      local started = 0
      if h[2] == 'EXECUTING' and h[3] == executor then started = 1 end
      out[#out + 1] = name == '' and entry or (name .. '/' .. entry)
      out[#out + 1] = id
      out[#out + 1] = h[1] or ''
      out[#out + 1] = h[2] or 'UNKNOWN'
      out[#out + 1] = started
      out[#out + 1] = h[4] or '0'
      out[#out + 1] = h[5] or '0'
      out[#out + 1] = h[6] or '0'
      left = left - 1
    end
  end
end
held(KEYS[1], '')
for _, name in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if left <= 0 then break end
  held(prefix .. 'queue.' .. name, name)
end
return out
