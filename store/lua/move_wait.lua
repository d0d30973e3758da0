-- move_wait.lua: moves a run that waits at an approval to another version. The parked
-- activation is made again at resume from the run's version (resume.lua), so the
-- approval's step and all after it follow the new version's graph.
--
-- KEYS[1] -> run hash
-- KEYS[2] -> events stream
--
-- ARGV[1] -> run id
-- ARGV[2] -> the approval node it waits at
-- ARGV[3] -> the version the caller checked the move from (the run's)
-- ARGV[4] -> the version to move to
-- ARGV[5] -> who moves it ("" unknown)
-- ARGV[6] -> now, unix ms
-- ARGV[7] -> events stream MAXLEN (approximate)
--
-- Returns {"ok"}, {"not_found"}, {"conflict", status} when the run does not wait at the
-- node, or {"changed", version} when the run's version is not ARGV[3].

local r = redis.call('HMGET', KEYS[1], 'status', 'version', 'moves')
local status, version = r[1], r[2]
if not status then return {'not_found'} end
if not redis.call('HGET', KEYS[1], 'wait:' .. ARGV[2]) then return {'conflict', status} end
if version ~= ARGV[3] then return {'changed', version} end
if ARGV[4] == version then return {'ok'} end
local moves = {}
if r[3] then moves = cjson.decode(r[3]) end
local m = {from = version, to = ARGV[4], node = ARGV[2], by = ARGV[5], at = tonumber(ARGV[6]), waiting = true}
moves[#moves + 1] = m
redis.call('HSET', KEYS[1], 'version', ARGV[4], 'moves', cjson.encode(moves), 'updated_at', ARGV[6])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[7], '*', 'type', 'moved', 'run', ARGV[1], 'node', ARGV[2], 'data', cjson.encode(m), 'ckpt', '', 'step', '')
return {'ok'}
