-- fail.lua: records a failed step attempt in the run's history (a checkpoint of kind
-- "error"). The entry stays pending for a retry, unless the error is permanent or the
-- entry was delivered max_attempts times: then it moves to the dead letters, is
-- acknowledged, and the run fails. A cancelled or lost run's entry is dropped instead:
-- nothing retries after a cancel.
--
-- KEYS[1] -> the node's stream (holds the entry)
-- KEYS[2] -> run hash
-- KEYS[3] -> dead-letter stream
-- KEYS[4] -> events stream
-- KEYS[5] -> results stream
-- KEYS[6..8] -> checkpoint stream, state hash and frames hash of the run
-- KEYS[9] -> expiry sorted set (finished runs by the time their keys expire)
--
-- ARGV[1] -> consumer group
-- ARGV[2] -> consumer name: the entry must still be pending for it
-- ARGV[3] -> entry id
-- ARGV[4] -> run id
-- ARGV[5] -> node id
-- ARGV[6] -> error message
-- ARGV[7] -> now, unix ms
-- ARGV[8] -> seconds a finished run is kept ("0": forever)
-- ARGV[9] -> "1" when the error is permanent
-- ARGV[10] -> max_attempts
-- ARGV[11] -> events stream MAXLEN (approximate)
-- ARGV[12] -> the checkpoint the step read (the error record's parent)
-- ARGV[13] -> the error record's packed body (see store/checkpoints.go)
--
-- Returns {"stale"}, {"dropped"}, {"retry", deliveries} or {"dead", deliveries, dead-letter id}.

local group, consumer, entry, run, node, err = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local now, ttl = ARGV[7], tonumber(ARGV[8])
local maxlen = ARGV[11]

local p = redis.call('XPENDING', KEYS[1], group, entry, entry, 1)
if #p == 0 or p[1][2] ~= consumer then
  return {'stale'}
end
local deliveries = tonumber(p[1][4])

local function expire(live)
  if ttl > 0 and live <= 0 then
    -- Nothing of the run is live: all of its keys expire together.
    redis.call('EXPIRE', KEYS[2], ttl)
    for i = 6, 8 do redis.call('EXPIRE', KEYS[i], ttl) end
    redis.call('ZADD', KEYS[9], tonumber(now) + ttl * 1000, run)
  end
end

local status = redis.call('HGET', KEYS[2], 'status')
if not status or status == 'cancelled' then
  redis.call('XACK', KEYS[1], group, entry)
  redis.call('XDEL', KEYS[1], entry)
  if status then expire(redis.call('HINCRBY', KEYS[2], 'live', -1)) end
  return {'dropped'}
end

local function event(kind, data)
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxlen, '*', 'type', kind, 'run', run, 'node', node, 'data', data, 'ckpt', '', 'step', '')
end

redis.call('XADD', KEYS[6], '*', 'n', node, 'p', ARGV[12], 'c', ARGV[13], 'k', '1', 's', '', 't', now)

if ARGV[9] ~= '1' and deliveries < tonumber(ARGV[10]) then
  redis.call('HSET', KEYS[2], 'last_error', err, 'last_error_node', node, 'updated_at', now)
  event('retry', cjson.encode({error = err, attempt = deliveries}))
  return {'retry', deliveries}
end

-- Dead letter: the activation's fields, so it can be retried as it was.
local fields = {'node', node, 'run', run, 'error', err, 'attempts', tostring(deliveries), 'entry', entry, 'ts', now}
local e = redis.call('XRANGE', KEYS[1], entry, entry)
if #e > 0 then
  local f = e[1][2]
  for j = 1, #f, 2 do
    if f[j] ~= 'run' then
      fields[#fields + 1] = 'a:' .. f[j]
      fields[#fields + 1] = f[j + 1]
    end
  end
end
local id = redis.call('XADD', KEYS[3], '*', unpack(fields))
redis.call('XACK', KEYS[1], group, entry)
redis.call('XDEL', KEYS[1], entry)
event('dead', cjson.encode({error = err, attempts = deliveries, dead = id}))

local live = redis.call('HINCRBY', KEYS[2], 'live', -1)
redis.call('HINCRBY', KEYS[2], 'dead', 1)
if status == 'queued' or status == 'running' or status == 'waiting' then
  redis.call('HSET', KEYS[2], 'status', 'failed', 'error', err, 'error_node', node, 'finished_at', now, 'updated_at', now)
  redis.call('XADD', KEYS[5], '*', 'run', run, 'status', 'failed')
  event('run', '{"status":"failed"}')
end
-- The open forks stay (they expire with the run): a retry of the dead letter arrives at
-- its join like any branch.
expire(live)
return {'dead', deliveries, id}
