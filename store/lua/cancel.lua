-- cancel.lua: cancels a run. Its activations still in streams are dropped at their next
-- step; approvals it waits on are withdrawn.
--
-- KEYS[1] -> run hash
-- KEYS[2] -> checkpoint stream of the run
-- KEYS[3] -> state hash of the run
-- KEYS[4] -> frames hash of the run
-- KEYS[5] -> events stream
-- KEYS[6] -> results stream
-- KEYS[7] -> waits sorted set
-- KEYS[8] -> expiry sorted set (finished runs by the time their keys expire)
--
-- ARGV[1] -> run id
-- ARGV[2] -> now, unix ms
-- ARGV[3] -> seconds a finished run is kept (0: forever)
-- ARGV[4] -> events stream MAXLEN (approximate)
--
-- Returns {"ok"}, {"not_found"} or {"conflict", status}.

local run, now, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'not_found'} end
if status ~= 'queued' and status ~= 'running' and status ~= 'waiting' then return {'conflict', status} end

local parked = tonumber(redis.call('HGET', KEYS[1], 'parked') or '0')
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(f, 1, 5) == 'wait:' then
    redis.call('ZREM', KEYS[7], run .. ' ' .. string.sub(f, 6))
    redis.call('HDEL', KEYS[1], f)
  end
end
local live = tonumber(redis.call('HGET', KEYS[1], 'live') or '0')
if parked > 0 then live = redis.call('HINCRBY', KEYS[1], 'live', 0 - parked) end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'parked', 0, 'error', 'cancelled', 'finished_at', now, 'updated_at', now)
redis.call('XADD', KEYS[6], '*', 'run', run, 'status', 'cancelled')
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[4], '*', 'type', 'run', 'run', run, 'node', '', 'data', '{"status":"cancelled"}', 'ckpt', '', 'step', '')
if ttl > 0 then
  for i = 1, 4 do redis.call('EXPIRE', KEYS[i], ttl) end
  redis.call('ZADD', KEYS[8], tonumber(now) + ttl * 1000, run)
end
return {'ok', live}
