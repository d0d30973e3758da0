-- prune.lua: ends the retention of a flow's partition's finished runs that are due: it
-- deletes their keys (a commit that finishes a run only scores it in the expiry set; its
-- keys carry no TTL) and removes them from the run index. Keys that expired by a TTL of
-- their own (set by a cancel, a failure or reading the run) are only removed from the
-- indexes.
--
-- KEYS[1] -> expiry sorted set (run -> ms its keys expire)
-- KEYS[2] -> runs sorted set (the index the listings read)
-- KEYS[3] -> the prefix of the partition's keys ("sluice:{f:FLOW}:"); a run's keys are
--            PREFIX run:RUN, ckpt:RUN, state:RUN and frames:RUN, in KEYS[1]'s slot
--
-- ARGV[1] -> now, unix ms
-- ARGV[2] -> at most this many runs are looked at
--
-- Returns how many runs were removed from the index.

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local n = 0
for _, run in ipairs(due) do
  local key = KEYS[3] .. 'run:' .. run
  local pttl = redis.call('PTTL', key)
  local gone = pttl == -2
  if pttl == -1 then
    local st = redis.call('HGET', key, 'status')
    if st == 'succeeded' or st == 'failed' or st == 'cancelled' then
      redis.call('DEL', key, KEYS[3] .. 'ckpt:' .. run, KEYS[3] .. 'state:' .. run, KEYS[3] .. 'frames:' .. run)
      gone = true
    else
      -- Not finished any more (a retried dead letter reopened it): not due.
      redis.call('ZREM', KEYS[1], run)
    end
  end
  if gone then
    redis.call('ZREM', KEYS[2], run)
    redis.call('ZREM', KEYS[1], run)
    n = n + 1
  elseif pttl >= 0 then
    redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) + pttl, run)
  end
end
return n
