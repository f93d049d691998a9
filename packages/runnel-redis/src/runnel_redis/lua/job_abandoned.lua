-- The deliveries an executor still holds, with what recovery needs to know of each job.
-- An entry already gone from the stream is acknowledged here (nothing to recover).
-- KEYS[1] queue stream. ARGV[1] key prefix, ARGV[2] group, ARGV[3] executor, ARGV[4] limit.
-- Returns 8 values per delivery:
--   entry, id, name, status, started (1 if it was running there), tries, retries, results
local ok, pending = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[2], '-', '+', ARGV[4], ARGV[3])
if not ok then return {} end
local out = {}
for _, p in ipairs(pending) do
  local entry = p[1]
  local found = redis.call('XRANGE', KEYS[1], entry, entry)
  local id = false
  if found[1] then
    local fields = found[1][2]
    for j = 1, #fields, 2 do
      if fields[j] == 'id' then id = fields[j + 1] end
    end
  end
  if not id then
    redis.call('XACK', KEYS[1], ARGV[2], entry)
  else
    local h = redis.call('HMGET', ARGV[1] .. 'job.' .. id,
      'name', 'status', 'executor', 'tries', 'retries', 'results')
    local started = 0
    if h[2] == 'EXECUTING' and h[3] == ARGV[3] then started = 1 end
    out[#out + 1] = entry
    out[#out + 1] = id
    out[#out + 1] = h[1] or ''
    out[#out + 1] = h[2] or 'UNKNOWN'
    out[#out + 1] = started
    out[#out + 1] = h[4] or '0'
    out[#out + 1] = h[5] or '0'
    out[#out + 1] = h[6] or '0'
  end
end
return out
