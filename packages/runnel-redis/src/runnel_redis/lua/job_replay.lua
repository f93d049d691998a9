-- Enqueue dead jobs again as new: tries reset, status SENT, their error and result gone.
-- KEYS[1] queue stream, KEYS[2] dead letters, KEYS[3] results index, then per letter the
-- job's record and its result. ARGV[1] now (ms), then per letter: dead letter entry, job id
-- (in the order of their keys). Returns how many were replayed (a letter already replayed
-- or purged is skipped).
local n = 0
for i = 2, #ARGV, 2 do
  if redis.call('XDEL', KEYS[2], ARGV[i]) == 1 then
    local id = ARGV[i + 1]
    local key, rkey = KEYS[i + 2], KEYS[i + 3]
    if redis.call('EXISTS', key) == 1 then
      redis.call('HDEL', key, 'error', 'started', 'finished', 'executor', 'due', 'progress')
      redis.call('DEL', rkey)
      redis.call('ZREM', KEYS[3], id)
      redis.call('HSET', key, 'status', 'SENT', 'tries', 0, 'replayed', ARGV[1],
        'entry', redis.call('XADD', KEYS[1], '*', 'id', id))
      n = n + 1
    end
  end
end
return n
