-- Starting a job just read from a queue stream, shared by job_take.lua and
-- job_take_queues.lua (scripts.py puts it in front of each): status EXECUTING, the try
-- counted, the executor and start time recorded, and the entry named in the job (for a
-- cancel: a client older than cancelling did not name it), in the same script as the read.
-- An entry whose job is gone (purged while queued) or was cancelled while queued is
-- acknowledged and deleted instead.
-- Appends 8 values to out: ticket, id, name, payload, codec, tries, retries, results.
local function start_job(queue, group, executor, now, prefix, entry, id, ticket, out)
  local key = id and (prefix .. 'job.' .. id)
  local f = key and redis.call('HMGET', key, 'name', 'payload', 'codec', 'retries', 'results',
    'tries', 'status')
  if not f or not f[1] or f[7] == 'CANCELLED' then
    redis.call('XACK', queue, group, entry)
    redis.call('XDEL', queue, entry)
    return false
  end
  local tries = tonumber(f[6] or 0) + 1
  redis.call('HSET', key, 'status', 'EXECUTING', 'tries', tries, 'started', now,
    'executor', executor, 'entry', entry)
  out[#out + 1] = ticket
  out[#out + 1] = id
  out[#out + 1] = f[1]
  out[#out + 1] = f[2]
  out[#out + 1] = f[3]
  out[#out + 1] = tries
  out[#out + 1] = f[4]
  out[#out + 1] = f[5]
  return true
end
