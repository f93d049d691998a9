-- KEYS[1]: a partition stream. ARGV: first id, last id (both included), n. The id of the
-- n-th entry from the first, or of the last one in range if there are fewer; false if
-- none. Lets a reader bound what it reads next without fetching the entries.

local found = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[2], 'COUNT', ARGV[3])
if #found == 0 then
  return false
end
return found[#found][1]
