-- Admit a delivery of a job declared with limits before it starts, or put it off: the
-- concurrency slots first (those of executors whose heartbeat expired are freed), then the
-- rate (a GCRA on the server's clock: per job name, the next start's turn). Put off, the
-- delivery ends (XACK + XDEL), its try is taken back, and the job waits on its queue's
-- schedule with `waiting` saying why. Jobs put off by the rate are due one turn after
-- another (the rate's line), not all at the next turn, so that each comes back when it
-- can start. Admitted, the slot is held until job_finish.lua or job_cancel.lua frees it.
-- KEYS[1] the delivery's queue stream, KEYS[2] that queue's schedule, KEYS[3] job hash,
-- KEYS[4] held (hash: ticket -> executor), KEYS[5] rate (hash, microseconds on the
-- server's clock: t = the next start's turn, l = the last turn promised to a job put off).
-- ARGV[1] key prefix, ARGV[2] group, ARGV[3] executor, ARGV[4] entry, ARGV[5] ticket,
-- ARGV[6] job id, ARGV[7] now (ms, the worker's clock), ARGV[8] slots ('0': no limit),
-- ARGV[9] wait when the slots are full (ms), ARGV[10] rate interval (us, '0': no limit),
-- ARGV[11] rate burst tolerance (us).
-- Returns {'ok'}, {'gone'} (the delivery is not this executor's any more), or
-- {'rate' or 'concurrency', due (ms)}.
local queue, schedule, job, held, rate = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local prefix, executor, entry, ticket = ARGV[1], ARGV[3], ARGV[4], ARGV[5]
local now = tonumber(ARGV[7])
local mine = redis.call('XPENDING', queue, ARGV[2], entry, entry, 1, executor)
if #mine == 0 then return {'gone'} end
if redis.call('EXISTS', job) == 0 then return {'ok'} end  -- purged: its outcome is dropped

local function defer(limit, due)
  redis.call('XACK', queue, ARGV[2], entry)
  redis.call('XDEL', queue, entry)
  local tries = redis.call('HINCRBY', job, 'tries', -1)
  redis.call('HSET', job, 'status', tries > 0 and 'RETRY' or 'SENT', 'due', due,
    'waiting', limit)
  redis.call('HDEL', job, 'started', 'executor', 'entry')
  redis.call('ZADD', schedule, due, ARGV[6])
  return {limit, due}
end

local slots = tonumber(ARGV[8])
if slots > 0 then
  local holders = redis.call('HGETALL', held)
  local alive = {[executor] = true}
  local count = 0
  for i = 1, #holders, 2 do
    local holder = holders[i + 1]
    if alive[holder] == nil then
      alive[holder] = redis.call('EXISTS', prefix .. 'beat.' .. holder) == 1
    end
    if alive[holder] then
      count = count + 1
    else
      redis.call('HDEL', held, holders[i])  -- its executor stopped beating
    end
  end
  if count >= slots then return defer('concurrency', now + tonumber(ARGV[9])) end
end

local interval = tonumber(ARGV[10])
if interval > 0 then
  local t = redis.call('TIME')
  local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local stored = redis.call('HMGET', rate, 't', 'l')
  local turn = math.max(tonumber(stored[1] or clock), clock)
  local allowed = turn - tonumber(ARGV[11])
  local last = turn
  if allowed > clock then
    last = math.max(tonumber(stored[2] or 0) + interval, allowed)
    redis.call('HSET', rate, 'l', string.format('%d', last))
  else
    turn = turn + interval
    last = math.max(tonumber(stored[2] or 0), turn)
    redis.call('HSET', rate, 't', string.format('%d', turn))
  end
  redis.call('PEXPIRE', rate, math.ceil((last - clock) / 1000) + 1000)
  if allowed > clock then return defer('rate', now + math.ceil((last - clock) / 1000)) end
end

if slots > 0 then redis.call('HSET', held, ticket, executor) end
redis.call('HDEL', job, 'waiting')
return {'ok'}
