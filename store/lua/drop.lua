-- drop.lua: acknowledges an activation whose run was cancelled or is gone, without
-- committing a step. A step the cancel stopped while it ran is recorded in the run's
-- history as "interrupted".
--
-- KEYS[1] -> the node's stream (holds the entry)
-- KEYS[2] -> run hash
-- KEYS[3] -> checkpoint stream of the run
-- KEYS[4] -> state hash of the run
-- KEYS[5] -> events stream
-- KEYS[6] -> expiry sorted set
--
-- ARGV[1] -> consumer group
-- ARGV[2] -> consumer name: the entry must still be pending for it
-- ARGV[3] -> entry id
-- ARGV[4] -> run id
-- ARGV[5] -> node id
-- ARGV[6] -> the checkpoint the step read (the interrupted record's parent)
-- ARGV[7] -> the interrupted record's packed body, or "" for none
-- ARGV[8] -> now, unix ms
-- ARGV[9] -> seconds a finished run is kept ("0": forever)
-- ARGV[10] -> events stream MAXLEN (approximate)
--
-- Returns "dropped", "stale" or "running" (the run goes on: nothing was dropped).

local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 0 or p[1][2] ~= ARGV[2] then return 'stale' end
local status = redis.call('HGET', KEYS[2], 'status')
if status and status ~= 'cancelled' then return 'running' end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
if not status then return 'dropped' end
if ARGV[7] ~= '' then
  local id = redis.call('XADD', KEYS[3], '*', 'n', ARGV[5], 'p', ARGV[6], 'c', ARGV[7], 'k', '1', 's', '', 't', ARGV[8])
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[10], '*', 'type', 'interrupted', 'run', ARGV[4], 'node', ARGV[5], 'data', '{}', 'ckpt', id, 'step', '')
end
local live = redis.call('HINCRBY', KEYS[2], 'live', -1)
if live <= 0 and ARGV[9] ~= '0' then
  for i = 2, 4 do redis.call('EXPIRE', KEYS[i], ARGV[9]) end
  redis.call('ZADD', KEYS[6], tonumber(ARGV[8]) + tonumber(ARGV[9]) * 1000, ARGV[4])
end
return 'dropped'
