-- Delete dead jobs: the letter, the job's record and its result.
-- KEYS[1] dead letters, KEYS[2] results index, then per letter the job's record and its
-- result. ARGV: per letter, dead letter entry and job id (in the order of their keys).
-- Returns how many letters were deleted.
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('XDEL', KEYS[1], ARGV[i]) == 1 then
    redis.call('DEL', KEYS[i + 2], KEYS[i + 3])
    redis.call('ZREM', KEYS[2], ARGV[i + 1])
    n = n + 1
  end
end
return n
