-- retry_dead.lua: puts a dead letter back on its node's stream as a new activation
-- (attempts start again) and reopens its run.
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
--
-- Returns {"ok", new entry id}, {"not_found"} or {"gone"} when the run has expired.

local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #e == 0 then return {'not_found'} end
local f = e[1][2]
local run, node = nil, nil
local fields = {}
for j = 1, #f, 2 do
  if f[j] == 'run' then run = f[j + 1] end
  if f[j] == 'node' then node = f[j + 1] end
  if string.sub(f[j], 1, 2) == 'a:' then
    fields[#fields + 1] = string.sub(f[j], 3)
    fields[#fields + 1] = f[j + 1]
  end
end
if node ~= ARGV[2] then return {'not_found'} end
local status = redis.call('HGET', KEYS[3], 'status')
if not status then return {'gone'} end
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
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*', 'type', 'retried', 'run', run, 'node', node, 'data', '{"dead":"' .. ARGV[1] .. '"}', 'ckpt', '', 'step', '')
return {'ok', id}
