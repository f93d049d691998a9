-- KEYS[1]: the membership key (or empty), KEYS[2]: the control stream. ARGV: the new
-- membership JSON (ignored without KEYS[1]), control MAXLEN, reason, executor.
-- Store the membership and announce the change, allowed when Redis is full.
-- Sent after the flags line '#!lua flags=allow-oom' (scripts.ALLOW_OOM).

if #KEYS == 2 then
  redis.call('SET', KEYS[1], ARGV[1])
end
return redis.call('XADD', KEYS[#KEYS], 'MAXLEN', '~', ARGV[2], '*',
  'reason', ARGV[3], 'executor', ARGV[4])
