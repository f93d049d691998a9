-- Take jobs for one executor and start them (job_start.lua): status EXECUTING, the try
-- counted, in the same step as the read, so a job is never held without its status saying
-- so; the job names its entry (as enqueued, or by a client that did not name it), for a
-- cancel. The default queue only; job_take_queues.lua takes from several.
-- KEYS[1] queue stream.
-- ARGV[1] key prefix, ARGV[2] group, ARGV[3] executor (its consumer name), ARGV[4] now (ms),
-- ARGV[5] how many; then, when the executor has just read entries itself (a blocking
-- read, which scripts cannot do), their entry id and job id pairs, to start those.
-- Returns 8 values per job started:
--   entry, id, name, payload, codec, tries, retries, results
local queue, group, executor, now = KEYS[1], ARGV[2], ARGV[3], ARGV[4]
local pairs_ = {}
if #ARGV > 5 then
  for i = 6, #ARGV, 2 do
    -- Only entries still delivered to this executor: paused between its read and this
    -- call, it may have been presumed dead and its entries given to others meanwhile.
    local mine = redis.call('XPENDING', queue, group, ARGV[i], ARGV[i], 1, executor)
    if #mine > 0 then
      pairs_[#pairs_ + 1] = {ARGV[i], ARGV[i + 1]}
    end
  end
else
  local reply = redis.call('XREADGROUP', 'GROUP', group, executor, 'COUNT', ARGV[5],
    'STREAMS', queue, '>')
  if reply then
    for _, entry in ipairs(reply[1][2]) do
      local fields, id = entry[2], false
      for j = 1, #fields, 2 do
        if fields[j] == 'id' then id = fields[j + 1] end
      end
      pairs_[#pairs_ + 1] = {entry[1], id}
    end
  end
end
local out = {}
for _, pair in ipairs(pairs_) do
  start_job(queue, group, executor, now, ARGV[1], pair[1], pair[2], pair[1], out)
end
return out
