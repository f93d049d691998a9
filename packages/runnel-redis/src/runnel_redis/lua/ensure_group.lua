-- KEYS: partition streams. ARGV[1]: group. Create the group on each stream that lacks it
-- (and the stream too), allowed when Redis is full, so a worker can start on a full Redis.
-- Sent after the flags line '#!lua flags=allow-oom' (scripts.ALLOW_OOM).

for _, key in ipairs(KEYS) do
  local done = redis.pcall('XGROUP', 'CREATE', key, ARGV[1], '0', 'MKSTREAM')
  if type(done) == 'table' and done.err and not string.find(done.err, 'BUSYGROUP') then
    return done
  end
end
return 1
