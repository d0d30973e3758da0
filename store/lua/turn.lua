-- turn.lua: records one turn of a long step (an agent's model reply or tool result) in
-- the run's checkpoint history, if the step is still this worker's.
--
-- KEYS[1] -> the node's stream (holds the step's entry)
-- KEYS[2] -> checkpoint stream of the run
-- KEYS[3] -> events stream
--
-- ARGV[1] -> consumer group
-- ARGV[2] -> consumer name
-- ARGV[3] -> entry id
-- ARGV[4] -> run id
-- ARGV[5] -> node id
-- ARGV[6] -> the step's input checkpoint id (the turn's parent)
-- ARGV[7] -> the checkpoint's packed body (kind "turn"; see store/checkpoints.go)
-- ARGV[8] -> turn JSON, for the live event
-- ARGV[9] -> now, unix ms
-- ARGV[10] -> events stream MAXLEN (approximate)
--
-- Returns {"ok", checkpoint id} or {"stale"}.

local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 0 or p[1][2] ~= ARGV[2] then return {'stale'} end
local id = redis.call('XADD', KEYS[2], '*', 'n', ARGV[5], 'p', ARGV[6], 'c', ARGV[7], 'k', '1', 's', '', 't', ARGV[9])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[10], '*', 'type', 'turn', 'run', ARGV[4], 'node', ARGV[5], 'data', ARGV[8], 'ckpt', id, 'step', '')
return {'ok', id}
