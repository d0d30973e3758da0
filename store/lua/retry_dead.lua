-- retry_dead.lua: puts a dead letter back on its node's stream as a new activation and
-- reopens its run — on the version it ran, or moved to another one. Attempts go on being
-- counted: the activation carries how many attempts came before it ("ao").
--
-- KEYS[1] -> dead-letter stream
-- KEYS[2] -> the node's stream
-- KEYS[3] -> run hash
-- KEYS[4] -> events stream
-- KEYS[5..7] -> checkpoint stream, state hash and frames hash of the run
-- KEYS[8] -> expiry sorted set: the reopened run no longer expires
--
-- ARGV[1] -> dead-letter id
-- ARGV[2] -> node id the caller read from the dead letter (checked again here)
-- ARGV[3] -> now, unix ms
-- ARGV[4] -> events stream MAXLEN (approximate)
-- ARGV[5] -> the version to retry on ("": the version the dead letter ran)
-- ARGV[6] -> the version the caller checked the move from (the dead letter's "v"; the
--            move is refused with "changed" when it no longer is)
-- ARGV[7] -> who retries ("" unknown), recorded with a move
--
-- Returns {"ok", new entry id}, {"not_found"}, {"gone"} when the run has expired, or
-- {"changed", version} when the dead letter's version is not the one checked.

local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #e == 0 then return {'not_found'} end
local f = e[1][2]
local run, node, attempts, from = nil, nil, 0, ''
local fields = {}
local before = 0
for j = 1, #f, 2 do
  local k, v = f[j], f[j + 1]
  if k == 'run' then run = v end
  if k == 'node' then node = v end
  if k == 'attempts' then attempts = tonumber(v) or 0 end
  if k == 'a:v' then from = v end
  if k == 'a:ao' then
    before = tonumber(v) or 0
  elseif string.sub(k, 1, 2) == 'a:' and k ~= 'a:v' then
    fields[#fields + 1] = string.sub(k, 3)
    fields[#fields + 1] = v
  end
end
if node ~= ARGV[2] then return {'not_found'} end
local to = ARGV[5]
if to == '' then to = from end
if ARGV[6] ~= '' and ARGV[6] ~= from then return {'changed', from} end
local status = redis.call('HGET', KEYS[3], 'status')
if not status then return {'gone'} end
fields[#fields + 1] = 'v'
fields[#fields + 1] = to
fields[#fields + 1] = 'ao'
fields[#fields + 1] = tostring(before + attempts)
local id = redis.call('XADD', KEYS[2], '*', 'run', run, unpack(fields))
redis.call('XDEL', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[3], 'live', 1)
redis.call('HINCRBY', KEYS[3], 'dead', -1)
for i = 3, 7 do
  if i ~= 4 then redis.call('PERSIST', KEYS[i]) end
end
redis.call('ZREM', KEYS[8], run)
if status == 'failed' then
  redis.call('HSET', KEYS[3], 'status', 'running', 'updated_at', ARGV[3])
  redis.call('HDEL', KEYS[3], 'error', 'error_node', 'finished_at')
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*', 'type', 'run', 'run', run, 'node', '', 'data', '{"status":"running"}', 'ckpt', '', 'step', '')
end
if to ~= from then
  -- The run moves: its later steps follow the new version's graph (commit.lua gives
  -- new activations the run's version).
  local moves = {}
  local old = redis.call('HGET', KEYS[3], 'moves')
  if old then moves = cjson.decode(old) end
  local m = {from = from, to = to, node = node, dead = ARGV[1], by = ARGV[7], at = tonumber(ARGV[3]), attempt = before + attempts + 1}
  moves[#moves + 1] = m
  redis.call('HSET', KEYS[3], 'version', to, 'moves', cjson.encode(moves))
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*', 'type', 'moved', 'run', run, 'node', node, 'data', cjson.encode(m), 'ckpt', '', 'step', '')
end
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*', 'type', 'retried', 'run', run, 'node', node,
  'data', cjson.encode({dead = ARGV[1], version = to, attempt = before + attempts + 1}), 'ckpt', '', 'step', '')
return {'ok', id}
