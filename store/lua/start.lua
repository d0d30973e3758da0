-- start.lua: creates a run: its hash, its first checkpoint with the initial state, and
-- the activations of its first nodes.
--
-- KEYS[1] -> run hash
-- KEYS[2] -> checkpoint stream of the run
-- KEYS[3] -> state hash of the run
-- KEYS[4] -> runs sorted set
-- KEYS[5] -> events stream
-- KEYS[6..] -> streams of the first nodes
-- (all of the run's partition: the version's JSON, a flow-wide key, is checked by the
-- caller in the same round trip)
--
-- ARGV[1] -> run id
-- ARGV[2] -> version
-- ARGV[3] -> now, unix ms
-- ARGV[4] -> events stream MAXLEN (approximate)
-- ARGV[5] -> state JSON ("": the run's input, kept in the state hash)
-- ARGV[6], ARGV[7], ARGV[8] -> the first checkpoint's node, parent and packed body
-- ARGV[9] -> k, then k field/value pairs for the run hash (parent run, ...), but "input",
--            which the state hash keeps (its field "input", see store/keys.go)
-- ARGV[10+2k] -> optional: the run span's traceparent, a field "tp" of each activation
--
-- Returns {"ok", checkpoint id} or {"exists"}.

if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
local run, version, now = ARGV[1], ARGV[2], ARGV[3]

local ckpt = redis.call('XADD', KEYS[2], '*', 'n', ARGV[6], 'p', ARGV[7], 'c', ARGV[8], 'k', '1', 's', '0', 't', now)
local states = {ckpt, ARGV[5]}
local fields = {'status', 'queued', 'version', version, 'created_at', now, 'updated_at', now,
  'live', tostring(#KEYS - 5), 'last_ckpt', ckpt}
for i = 10, 9 + 2 * tonumber(ARGV[9]), 2 do
  if ARGV[i] == 'input' then
    states[3], states[4] = 'input', ARGV[i + 1]
  else
    fields[#fields + 1] = ARGV[i]; fields[#fields + 1] = ARGV[i + 1]
  end
end
redis.call('HSET', KEYS[3], unpack(states))
redis.call('HSET', KEYS[1], unpack(fields))
local trace = {}
local tp = ARGV[10 + 2 * tonumber(ARGV[9])]
if tp and tp ~= '' then trace = {'tp', tp} end
for i = 6, #KEYS do
  redis.call('XADD', KEYS[i], '*', 'run', run, 'v', version, 'ckpt', ckpt, 'tok', '', 'd', '1', unpack(trace))
end
redis.call('ZADD', KEYS[4], now, run)
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[4], '*', 'type', 'run', 'run', run, 'node', '', 'data', '{"status":"queued"}', 'ckpt', '', 'step', '')
return {'ok', ckpt}
