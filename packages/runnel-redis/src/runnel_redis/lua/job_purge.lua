-- Delete dead jobs: the letter, the job's record and its result.
-- KEYS[1] dead letters, KEYS[2] results index. ARGV[1] key prefix, then pairs:
-- dead letter entry, job id. Returns how many letters were deleted.
local n = 0
for i = 2, #ARGV, 2 do
  if redis.call('XDEL', KEYS[1], ARGV[i]) == 1 then
    local id = ARGV[i + 1]
    redis.call('DEL', ARGV[1] .. 'job.' .. id, ARGV[1] .. 'result.' .. id)
    redis.call('ZREM', KEYS[2], id)
    n = n + 1
  end
end
return n
