-- prune.lua: removes runs whose keys have expired from a flow's run index.
--
-- KEYS[1] -> expiry sorted set (run -> ms its keys expire)
-- KEYS[2] -> runs sorted set (the index the listings read)
-- KEYS[3] -> the prefix of run hashes ("sluice:{f:FLOW}:run:"), one slot with KEYS[1..2]
--
-- ARGV[1] -> now, unix ms
-- ARGV[2] -> at most this many runs are looked at
--
-- Returns how many runs were removed from the index.

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local n = 0
for _, run in ipairs(due) do
  local pttl = redis.call('PTTL', KEYS[3] .. run)
  if pttl == -2 then
    redis.call('ZREM', KEYS[2], run)
    redis.call('ZREM', KEYS[1], run)
    n = n + 1
  elseif pttl == -1 then
    -- Kept forever again (a retried dead letter reopened it): not due any more.
    redis.call('ZREM', KEYS[1], run)
  else
    redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) + pttl, run)
  end
end
return n
