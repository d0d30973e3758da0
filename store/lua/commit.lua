-- commit.lua: commits one step of a run — or a few pure steps in a row, fused — all or
-- nothing.
--
-- KEYS[1] -> the node's stream (holds the consumed entry)
-- KEYS[2] -> run hash
-- KEYS[3] -> checkpoint stream of the run
-- KEYS[4] -> state hash of the run (checkpoint id -> state JSON)
-- KEYS[5] -> frames hash of the run (open forks)
-- KEYS[6] -> events stream
-- KEYS[7] -> results stream
-- KEYS[8] -> waits sorted set
-- KEYS[9] -> expiry sorted set (finished runs by the time their keys expire)
-- KEYS[10..] -> streams the ops below add activations to, named by index into KEYS
--
-- ARGV[1] -> consumer group
-- ARGV[2] -> consumer name: the entry must still be pending for it (the fence)
-- ARGV[3] -> entry id
-- ARGV[4] -> run id
-- ARGV[5] -> now, unix ms
-- ARGV[6] -> max_steps: the deepest an activation may be (the loop guard)
-- ARGV[7] -> seconds a finished run is kept (0: forever)
-- ARGV[8] -> keep_last: checkpoints kept when the run finishes (0: all)
-- ARGV[9] -> events stream MAXLEN (approximate)
-- ARGV[10] -> depth of the consumed activation: steps along its line since the run started
-- ARGV[11] -> s, the number of steps committed (the first ran the consumed activation, each
--             further one the single successor of the one before)
-- then, per step:
--   node id
--   n, the number of checkpoint field/value pairs, then the 2n values; a "parent" of
--     "$prev" is the checkpoint of the step before
--   state JSON after the step
--   input tokens, output tokens spent by the step
--   output JSON of a final (output) node, or ""
--   event data JSON
-- then, for the last step:
--   wait record JSON of an approval that parks the run, or ""; then its deadline ms (0: none)
--   m, the number of ops, then the ops, each a name and its arguments:
--     send   UPDATE STATE           a fanout seed checkpoint; its id becomes the next ref
--     open   FRAME N TOK REF KEY    a fork with N branches; TOK is the stack outside it,
--                                   REF its base checkpoint, KEY the join's stream index
--     split  FRAME N                the current branch of FRAME became N branches
--     xadd   KEY REF TOK            an activation on KEYS[KEY] reading checkpoint REF
--     arrive FRAME BRANCH REF KEY   a branch reached FRAME's join with checkpoint REF
--     giveback FRAME KEY            a branch of FRAME ended elsewhere
--     delframe FRAME                the join of FRAME ran: forget the fork
--   A REF is "$" (the last step's checkpoint) or "$k" (the k-th send of this commit).
--   Activations added here are one deeper than the last step; a join's activation is
--   one deeper than the step that opened its fork.
--
-- Returns {"ok", last checkpoint id, step number, live activations, run status}, or
-- {"stale"} when the fence fails, {"dropped", status} for a cancelled or lost run,
-- {"max_steps", depth} when the activation is deeper than max_steps (the run fails).

local group, consumer, entry, run = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = ARGV[5]
local ttl = tonumber(ARGV[7])
local keep = tonumber(ARGV[8])
local maxlen = ARGV[9]
local depth = tonumber(ARGV[10])
local nsteps = tonumber(ARGV[11])
local nextdepth = tostring(depth + nsteps)
local node = ARGV[12] -- the consumed entry's node; then the step being committed

local p = redis.call('XPENDING', KEYS[1], group, entry, entry, 1)
if #p == 0 or p[1][2] ~= consumer then
  return {'stale'}
end

-- The run is read once and written once: the script runs atomically.
local r = redis.call('HMGET', KEYS[2], 'status', 'version', 'steps', 'live', 'parked', 'dead')
local status, version = r[1], r[2]
local steps, live = tonumber(r[3] or '0'), tonumber(r[4] or '0')
local parked, dead = tonumber(r[5] or '0'), tonumber(r[6] or '0')
local set = {'updated_at', now} -- run hash fields written at the end

local function consume()
  redis.call('XACK', KEYS[1], group, entry)
  redis.call('XDEL', KEYS[1], entry)
end

local function expire_run()
  if ttl > 0 then
    for i = 2, 5 do redis.call('EXPIRE', KEYS[i], ttl) end
    redis.call('ZADD', KEYS[9], tonumber(now) + ttl * 1000, run)
  end
end

local function runevent(st)
  redis.call('XADD', KEYS[6], 'MAXLEN', '~', maxlen, '*', 'type', 'run', 'run', run, 'node', '', 'data', '{"status":"' .. st .. '"}', 'ckpt', '', 'step', '')
end

-- finish ends the run: status, result entry, retention.
local function finish(st)
  set[#set + 1] = 'status'; set[#set + 1] = st
  set[#set + 1] = 'finished_at'; set[#set + 1] = now
  redis.call('XADD', KEYS[7], '*', 'run', run, 'status', st)
  redis.call('DEL', KEYS[5])
  if keep > 0 then
    local n = redis.call('XLEN', KEYS[3])
    if n > keep then
      local old = redis.call('XRANGE', KEYS[3], '-', '+', 'COUNT', n - keep)
      for _, e in ipairs(old) do
        redis.call('HDEL', KEYS[4], e[1])
        redis.call('XDEL', KEYS[3], e[1])
      end
    end
  end
  runevent(st)
end

if not status or status == 'cancelled' or status == 'succeeded' then
  -- A cancelled run drops its activations; a lost run (expired, or Redis lost it)
  -- cannot continue; a succeeded run has nothing live.
  consume()
  if status then
    live = redis.call('HINCRBY', KEYS[2], 'live', -1)
    if live <= 0 then expire_run() end
  end
  return {'dropped', status or 'lost'}
end

if depth > tonumber(ARGV[6]) then
  consume()
  set[#set + 1] = 'live'; set[#set + 1] = live - 1
  if status ~= 'failed' then
    set[#set + 1] = 'error'
    set[#set + 1] = 'the run went more than max_steps (' .. ARGV[6] .. ') steps deep: a loop that does not end?'
    set[#set + 1] = 'error_node'; set[#set + 1] = node
    finish('failed')
    expire_run()
  end
  redis.call('HSET', KEYS[2], unpack(set))
  return {'max_steps', depth}
end
-- The steps: a checkpoint, its state and an event each.
local i = 12
local ckpt = ''
for _ = 1, nsteps do
  node = ARGV[i]
  local n = tonumber(ARGV[i + 1])
  local fields = {}
  for j = i + 2, i + 1 + 2 * n do
    local v = ARGV[j]
    if v == '$prev' then v = ckpt end
    fields[#fields + 1] = v
  end
  local a = i + 2 + 2 * n
  steps = steps + 1
  fields[#fields + 1] = 'step'; fields[#fields + 1] = steps
  fields[#fields + 1] = 'ts'; fields[#fields + 1] = now
  ckpt = redis.call('XADD', KEYS[3], '*', unpack(fields))
  redis.call('HSET', KEYS[4], ckpt, ARGV[a])
  local tin, tout = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  if tin > 0 then redis.call('HINCRBY', KEYS[2], 'in_tokens', tin) end
  if tout > 0 then redis.call('HINCRBY', KEYS[2], 'out_tokens', tout) end
  if ARGV[a + 3] ~= '' then set[#set + 1] = 'out:' .. node; set[#set + 1] = ARGV[a + 3] end
  redis.call('XADD', KEYS[6], 'MAXLEN', '~', maxlen, '*', 'type', 'step', 'run', run, 'node', node, 'data', ARGV[a + 4], 'ckpt', ckpt, 'step', steps)
  i = a + 5
end
local wait, deadline = ARGV[i], tonumber(ARGV[i + 1])
local m = tonumber(ARGV[i + 2])
i = i + 3

local refs = {}
local function ref(x)
  if x == '$' then return ckpt end
  return refs[tonumber(string.sub(x, 2))]
end

local delta = -1
local function fire(frame, key)
  local f = redis.call('HMGET', KEYS[5], frame .. ':base', frame .. ':tok', frame .. ':depth')
  redis.call('XADD', KEYS[key], '*', 'run', run, 'v', version, 'ckpt', f[1], 'tok', f[2], 'join', frame, 'd', f[3] or nextdepth)
  delta = delta + 1
end
local function done(frame, key)
  local d = redis.call('HINCRBY', KEYS[5], frame .. ':d', 1)
  local want = tonumber(redis.call('HGET', KEYS[5], frame .. ':n'))
  if want and d == want then fire(frame, key) end
end

for _ = 1, m do
  local op = ARGV[i]
  if op == 'xadd' then
    redis.call('XADD', KEYS[tonumber(ARGV[i + 1])], '*', 'run', run, 'v', version, 'ckpt', ref(ARGV[i + 2]), 'tok', ARGV[i + 3], 'd', nextdepth)
    delta = delta + 1
    i = i + 4
  elseif op == 'send' then
    local id = redis.call('XADD', KEYS[3], '*', 'node', node, 'kind', 'send', 'parent', ckpt, 'update', ARGV[i + 1], 'output', '', 'm', '', 'step', steps, 'ts', now)
    redis.call('HSET', KEYS[4], id, ARGV[i + 2])
    refs[#refs + 1] = id
    i = i + 3
  elseif op == 'open' then
    local frame, count = ARGV[i + 1], tonumber(ARGV[i + 2])
    redis.call('HSET', KEYS[5], frame .. ':n', count, frame .. ':d', 0, frame .. ':tok', ARGV[i + 3], frame .. ':base', ref(ARGV[i + 4]), frame .. ':depth', nextdepth)
    if count == 0 then fire(frame, tonumber(ARGV[i + 5])) end
    i = i + 6
  elseif op == 'split' then
    redis.call('HINCRBY', KEYS[5], ARGV[i + 1] .. ':n', tonumber(ARGV[i + 2]))
    i = i + 3
  elseif op == 'arrive' then
    redis.call('HSET', KEYS[5], ARGV[i + 1] .. ':b:' .. ARGV[i + 2], ref(ARGV[i + 3]))
    done(ARGV[i + 1], tonumber(ARGV[i + 4]))
    i = i + 5
  elseif op == 'giveback' then
    done(ARGV[i + 1], tonumber(ARGV[i + 2]))
    i = i + 3
  elseif op == 'delframe' then
    local prefix = ARGV[i + 1] .. ':'
    for _, f in ipairs(redis.call('HKEYS', KEYS[5])) do
      if string.sub(f, 1, #prefix) == prefix then redis.call('HDEL', KEYS[5], f) end
    end
    i = i + 2
  else
    return redis.error_reply('commit.lua: unknown op ' .. tostring(op))
  end
end

if wait ~= '' then
  -- The activation stays live while it waits for a person.
  delta = delta + 1
  parked = parked + 1
  set[#set + 1] = 'parked'; set[#set + 1] = parked
  set[#set + 1] = 'wait:' .. node; set[#set + 1] = wait
  set[#set + 1] = 'waitckpt:' .. node; set[#set + 1] = ckpt
  if deadline > 0 then redis.call('ZADD', KEYS[8], deadline, run .. ' ' .. node) end
end

consume()
live = live + delta
set[#set + 1] = 'steps'; set[#set + 1] = steps
set[#set + 1] = 'live'; set[#set + 1] = live
set[#set + 1] = 'last_ckpt'; set[#set + 1] = ckpt
if status == 'queued' then set[#set + 1] = 'started_at'; set[#set + 1] = now end
local newstatus = status
if status ~= 'failed' then
  if live <= 0 then
    -- Nothing is live, but a branch in the dead letters means the run did not succeed.
    if dead > 0 then
      newstatus = 'failed'
      set[#set + 1] = 'error'; set[#set + 1] = dead .. ' activation(s) of this run are in the dead letters'
    else
      newstatus = 'succeeded'
    end
    finish(newstatus)
  elseif live <= parked then
    newstatus = 'waiting'
  else
    newstatus = 'running'
  end
  if newstatus ~= status and newstatus ~= 'succeeded' and newstatus ~= 'failed' then
    set[#set + 1] = 'status'; set[#set + 1] = newstatus
    runevent(newstatus)
  end
elseif live <= 0 then
  redis.call('DEL', KEYS[5])
end
redis.call('HSET', KEYS[2], unpack(set))
if live <= 0 then expire_run() end
return {'ok', ckpt, steps, live, newstatus}
