-- resume.lua: a person answered an approval: the parked activation goes back on the
-- node's stream with the decision, and the run continues.
--
-- KEYS[1] -> run hash
-- KEYS[2] -> the approval node's stream
-- KEYS[3] -> events stream
-- KEYS[4] -> waits sorted set
--
-- ARGV[1] -> run id
-- ARGV[2] -> node id
-- ARGV[3] -> decision JSON
-- ARGV[4] -> now, unix ms
-- ARGV[5] -> events stream MAXLEN (approximate)
--
-- Returns {"ok"}, {"not_found"} or {"conflict", status}.

local run, node = ARGV[1], ARGV[2]
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'not_found'} end
local wait = redis.call('HGET', KEYS[1], 'wait:' .. node)
if not wait then return {'conflict', status} end
local ckpt = redis.call('HGET', KEYS[1], 'waitckpt:' .. node)
local w = cjson.decode(wait)
local tok = w.tok or ''
local depth = tostring(w.depth or 1)
local version = redis.call('HGET', KEYS[1], 'version')
redis.call('HDEL', KEYS[1], 'wait:' .. node, 'waitckpt:' .. node)
redis.call('HINCRBY', KEYS[1], 'parked', -1)
redis.call('ZREM', KEYS[4], run .. ' ' .. node)
-- The run's traceparent, when it is traced, goes with the activation (see commit.lua).
local trace = {}
local tp = redis.call('HGET', KEYS[1], 'tp')
if tp then trace = {'tp', tp} end
redis.call('XADD', KEYS[2], '*', 'run', run, 'v', version, 'ckpt', ckpt, 'tok', tok, 'resume', ARGV[3], 'd', depth, unpack(trace))
if status == 'waiting' then
  redis.call('HSET', KEYS[1], 'status', 'running', 'updated_at', ARGV[4])
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'type', 'run', 'run', run, 'node', '', 'data', '{"status":"running"}', 'ckpt', '', 'step', '')
end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'type', 'resumed', 'run', run, 'node', node, 'data', ARGV[3], 'ckpt', '', 'step', '')
return {'ok'}
