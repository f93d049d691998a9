-- Take jobs from several queues for one executor, as a take plan says, and start them
-- (job_start.lua), all in one step: a later queue is read only for what the earlier
-- ones did not have.
-- KEYS: the queue streams, in the plan's order.
-- ARGV[1] key prefix, ARGV[2] group, ARGV[3] executor (its consumer name), ARGV[4] now
-- (ms), ARGV[5] how many in all; then per key: its quota, and the queue's name ('' for
-- the default queue).
-- First up to its quota from each queue, in order; then, while fewer than ARGV[5] are
-- taken, what is left from each queue, in order.
-- Returns {started, wait}: started holds 8 values per job started, as job_take.lua's (the
-- ticket of an entry of a named queue is 'name/entry'); wait is empty unless no queue
-- had an entry, and then holds the last id each stream has generated, from which a
-- blocking XREAD (which scripts cannot do) waits for the next entry of any of them.
local prefix, group, executor, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local want = tonumber(ARGV[5])
local out = {}
local taken, seen = 0, false

local function read(i, n)
  local queue, name = KEYS[i], ARGV[5 + 2 * i]
  local reply = redis.call('XREADGROUP', 'GROUP', group, executor, 'COUNT', n,
    'STREAMS', queue, '>')
  if not reply then return end
  for _, entry in ipairs(reply[1][2]) do
    seen = true
    local fields, id = entry[2], false
    for j = 1, #fields, 2 do
      if fields[j] == 'id' then id = fields[j + 1] end
    end
    local ticket = entry[1]
    if name ~= '' then ticket = name .. '/' .. entry[1] end
    if start_job(queue, group, executor, now, prefix, entry[1], id, ticket, out) then
      taken = taken + 1
    end
  end
end

for i = 1, #KEYS do
  local n = math.min(tonumber(ARGV[4 + 2 * i]), want - taken)
  if n > 0 then read(i, n) end
end
for i = 1, #KEYS do
  if taken >= want then break end
  read(i, want - taken)
end
local wait = {}
if not seen then
  for i = 1, #KEYS do
    local info = redis.call('XINFO', 'STREAM', KEYS[i])
    for j = 1, #info, 2 do
      if info[j] == 'last-generated-id' then wait[#wait + 1] = info[j + 1] end
    end
  end
end
return {out, wait}
