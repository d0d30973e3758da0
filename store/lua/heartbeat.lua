-- heartbeat.lua: resets the idle time of entries a worker is still running, so the
-- sweeper does not hand a long step to another worker. The delivery count stays as it
-- is (RETRYCOUNT says so explicitly: the embedded Redis counts a JUSTID claim as a
-- delivery). Entries another consumer has claimed are left alone.
--
-- KEYS[1] -> the node's stream
--
-- ARGV[1] -> consumer group
-- ARGV[2] -> consumer name
-- ARGV[3..] -> entry ids
--
-- Returns the number of entries refreshed.

local n = 0
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if #p > 0 and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'RETRYCOUNT', p[1][4], 'JUSTID')
    n = n + 1
  end
end
return n
