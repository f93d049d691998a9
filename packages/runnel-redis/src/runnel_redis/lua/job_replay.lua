-- Enqueue dead jobs again as new: tries reset, status SENT, their error and result gone.
-- KEYS[1] queue stream, KEYS[2] dead letters, KEYS[3] results index.
-- ARGV[1] key prefix, ARGV[2] now (ms), then pairs: dead letter entry, job id.
-- Returns how many were replayed (a letter already replayed or purged is skipped).
local n = 0
for i = 3, #ARGV, 2 do
  if redis.call('XDEL', KEYS[2], ARGV[i]) == 1 then
    local id = ARGV[i + 1]
    local key = ARGV[1] .. 'job.' .. id
    if redis.call('EXISTS', key) == 1 then
      redis.call('HDEL', key, 'error', 'started', 'finished', 'executor', 'due', 'progress')
      redis.call('DEL', ARGV[1] .. 'result.' .. id)
      redis.call('ZREM', KEYS[3], id)
      redis.call('HSET', key, 'status', 'SENT', 'tries', 0, 'replayed', ARGV[2],
        'entry', redis.call('XADD', KEYS[1], '*', 'id', id))
      n = n + 1
    end
  end
end
return n
