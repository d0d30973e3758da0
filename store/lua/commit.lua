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
-- KEYS[10..] -> streams the transitions below add activations to, named by index
--
-- ARGV[1] -> consumer group
-- ARGV[2] -> consumer name: the entry must still be pending for it (the fence)
-- ARGV[3] -> entry id
-- ARGV[4] -> run id
-- ARGV[5] -> now, unix ms
-- ARGV[6] -> max_steps: the deepest an activation may be (the loop guard)
-- ARGV[7] -> seconds a finished run is kept ("0": forever)
-- ARGV[8] -> keep_last: checkpoints kept when the run finishes ("0": all)
-- ARGV[9] -> events stream MAXLEN (approximate)
-- ARGV[10] -> depth of the consumed activation: steps along its line since the run started
-- ARGV[11] -> depth of the activations this commit adds (ARGV[10] + the steps committed)
-- ARGV[12] -> s, the number of steps committed (the first ran the consumed activation,
--             each further one the single successor of the one before)
-- ARGV[13], ARGV[14] -> input and output tokens the steps spent ("0" for none)
-- ARGV[15] -> the steps' live events: a JSON array, one object per step
-- ARGV[16], ARGV[17] -> the first and the last step's node ids
-- ARGV[18] -> the parent checkpoint of the first step
-- ARGV[19] -> the steps' checkpoints, packed (see store/checkpoints.go): one entry holds
--             them all; step k of s gets the id "<entry>.<k-1>", the last the entry's id
-- ARGV[20] -> m, the number of states: 1 (only the last step's: a fused step's state is
--             computed from the updates when asked for) or s (each step's)
-- ARGV[21 .. 20+m] -> the state JSON after the steps
-- then f, the number of final (output node) values, then f pairs: node id, output JSON
-- then t, the number of transitions, then each: an op code and its arguments.
--   A KEY REF TOK             activate: an activation on KEYS[KEY] reading REF
--   S BODY STATE              a fanout seed checkpoint after the last step; it becomes ref k
--   O FRAME N TOK REF KEY     open a fork with N branches; TOK is the stack outside it,
--                             REF its base checkpoint, KEY the join's stream
--   P FRAME N                 the current branch of FRAME became N+1 branches
--   R FRAME BRANCH REF KEY    a branch reached FRAME's join with checkpoint REF
--   G FRAME KEY               a branch of FRAME ended elsewhere
--   C FRAME                   the join of FRAME ran: forget the fork
--   W RECORD DEADLINE         the last step parks the run for a person (deadline ms, 0: none)
--   A REF is "0" (the last step's checkpoint) or "k" (the k-th seed of this commit).
--   Every op is checked — its code, its number of arguments, that its KEY names one of
--   KEYS[10..], that its REF names a seed before it, that its counts are integers, and
--   that nothing is left over — before anything is written: Redis does not roll back a
--   script that stops with an error, so a bad op found halfway would leave half a
--   commit behind.
--
-- Events: one entry per commit, type "steps", its data the steps' events, its ckpt the
-- checkpoint entry's id, its step the first step's number, and its node the run's new
-- status when it changed ("" otherwise). The store splits it into one event per step
-- (and one for the run) when reading.
--
-- Returns {"ok", last checkpoint id, step number, live activations, run status}, or
-- {"stale"} when the fence fails, {"dropped", status} for a cancelled or lost run,
-- {"max_steps", depth} when the activation is deeper than max_steps (the run fails).

local group, consumer, entry, run = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = ARGV[5]
local maxlen = ARGV[9]
local depth = tonumber(ARGV[10])
local nextdepth = ARGV[11]
local nsteps = tonumber(ARGV[12])

-- The transitions and the counts before them are checked before the first write. The
-- check runs on every commit, so it is written for speed: no tables or closures, and
-- the counts it reads are kept for the writes below.
local arity = {A = 3, S = 2, O = 5, P = 2, R = 4, G = 2, C = 1, W = 2}
local nstates = tonumber(ARGV[20])
if not nstates or nstates < 1 then return redis.error_reply('commit.lua: the number of states is not a number') end
local nfinals = tonumber(ARGV[21 + nstates])
if not nfinals then return redis.error_reply('commit.lua: the number of outputs is not a number') end
local ntrans = tonumber(ARGV[22 + nstates + 2 * nfinals])
if not ntrans then return redis.error_reply('commit.lua: the number of transitions is not a number') end
do
  local nargv, nt = #ARGV, ntrans
  local i = 23 + nstates + 2 * nfinals
  local seeds = 0
  for k = 1, nt do
    local op = ARGV[i]
    local n = arity[op]
    if not n then
      return redis.error_reply('commit.lua: unknown transition ' .. tostring(op) .. ' (transition ' .. k .. ' of ' .. nt .. ')')
    end
    if i + n > nargv then
      return redis.error_reply('commit.lua: transition ' .. op .. ' needs ' .. n .. ' arguments (transition ' .. k .. ' of ' .. nt .. ')')
    end
    -- The stream it adds to (an index into KEYS), the checkpoint it reads (0, or a seed
    -- before it) and its count, where it has them.
    local key, ref, count
    if op == 'A' then key, ref = ARGV[i + 1], ARGV[i + 2]
    elseif op == 'S' then seeds = seeds + 1
    elseif op == 'O' then key, ref, count = ARGV[i + 5], ARGV[i + 4], ARGV[i + 2]
    elseif op == 'P' then count = ARGV[i + 2]
    elseif op == 'R' then key, ref = ARGV[i + 4], ARGV[i + 3]
    elseif op == 'G' then key = ARGV[i + 2]
    elseif op == 'W' then count = ARGV[i + 2]
    end
    if key then
      local x = tonumber(key)
      if not x or x < 10 or not KEYS[x] then
        return redis.error_reply('commit.lua: transition ' .. op .. ' names stream ' .. key .. ', which is not one of KEYS[10..' .. #KEYS .. ']')
      end
    end
    if ref and ref ~= '0' then
      local x = tonumber(ref)
      if not x or x < 0 or x > seeds then
        return redis.error_reply('commit.lua: transition ' .. op .. ' reads checkpoint ' .. ref .. ', but the commit has ' .. seeds .. ' seed(s) before it')
      end
    end
    if count and not tonumber(count) then
      return redis.error_reply('commit.lua: transition ' .. op .. ': ' .. count .. ' is not a number')
    end
    i = i + n + 1
  end
  if i ~= nargv + 1 then
    return redis.error_reply('commit.lua: ' .. (nargv + 1 - i) .. ' argument(s) left after the transitions: an op was short of arguments')
  end
end

local p = redis.call('XPENDING', KEYS[1], group, entry, entry, 1)
if #p == 0 or p[1][2] ~= consumer then
  return {'stale'}
end

-- The run is read once and written once: the script runs atomically.
local r = redis.call('HMGET', KEYS[2], 'status', 'version', 'steps', 'live', 'parked', 'dead', 'tp')
local status, version = r[1], r[2]
-- A traced run's activations carry its traceparent ("tp"), so that the steps of the
-- run form one trace in whatever process they run; an untraced run's carry nothing.
local trace = {}
if r[7] then trace = {'tp', r[7]} end
local steps, live = tonumber(r[3] or '0'), tonumber(r[4] or '0')
local parked, dead = tonumber(r[5] or '0'), tonumber(r[6] or '0')
local set = {'updated_at', now} -- run hash fields written at the end

local function consume()
  redis.call('XACK', KEYS[1], group, entry)
  redis.call('XDEL', KEYS[1], entry)
end

-- expire_run starts the retention of a run nothing is live in (its frames are gone).
local function expire_run()
  if ARGV[7] ~= '0' then
    redis.call('EXPIRE', KEYS[2], ARGV[7])
    redis.call('EXPIRE', KEYS[3], ARGV[7])
    redis.call('EXPIRE', KEYS[4], ARGV[7])
    redis.call('ZADD', KEYS[9], tonumber(now) + tonumber(ARGV[7]) * 1000, run)
  end
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

local newstatus = status
local function finish(st)
  newstatus = st
  set[#set + 1] = 'status'; set[#set + 1] = st
  set[#set + 1] = 'finished_at'; set[#set + 1] = now
  redis.call('XADD', KEYS[7], '*', 'run', run, 'status', st)
  -- A run with dead letters keeps its open forks: a retried one arrives at its join.
  if dead <= 0 then redis.call('DEL', KEYS[5]) end
  local keep = tonumber(ARGV[8])
  if keep > 0 then
    -- Keep the last keep checkpoints. Entries older than the one that holds the oldest
    -- of them go; in that entry (a packed commit), the states of the steps before it go,
    -- and kept_from tells readers where the kept history starts.
    local have = 0
    for _, e in ipairs(redis.call('XREVRANGE', KEYS[3], '+', '-')) do
      local f, cnt = e[2], 1
      for j = 1, #f, 2 do
        if f[j] == 'k' then cnt = tonumber(f[j + 1]) end
      end
      local drop = 0
      if have >= keep then
        drop = cnt
      elseif have + cnt > keep then
        drop = have + cnt - keep -- this entry's oldest steps go; the first kept is sub-step drop
        local cut = e[1] .. '.' .. drop
        if drop == cnt - 1 then cut = e[1] end
        set[#set + 1] = 'kept_from'; set[#set + 1] = cut
      end
      for q = 0, drop - 1 do
        if q == cnt - 1 then
          redis.call('HDEL', KEYS[4], e[1])
        else
          redis.call('HDEL', KEYS[4], e[1] .. '.' .. q)
        end
      end
      if drop == cnt then redis.call('XDEL', KEYS[3], e[1]) end
      have = have + cnt
    end
  end
end

if depth > tonumber(ARGV[6]) then
  consume()
  set[#set + 1] = 'live'; set[#set + 1] = live - 1
  if status ~= 'failed' then
    set[#set + 1] = 'error'
    set[#set + 1] = 'the run went more than max_steps (' .. ARGV[6] .. ') steps deep: a loop that does not end?'
    set[#set + 1] = 'error_node'; set[#set + 1] = ARGV[16]
    finish('failed')
    redis.call('XADD', KEYS[6], 'MAXLEN', '~', maxlen, '*', 'type', 'steps', 'run', run, 'node', 'failed', 'data', '[]', 'ckpt', '', 'step', '')
    expire_run()
  end
  redis.call('HSET', KEYS[2], unpack(set))
  return {'max_steps', depth}
end

-- The steps: one checkpoint entry for all of them, a state each.
local node = ARGV[17]
local first = steps + 1
steps = steps + nsteps
local ckpt = redis.call('XADD', KEYS[3], '*', 'n', node, 'p', ARGV[18], 'c', ARGV[19], 'k', ARGV[12], 's', tostring(first), 't', now)
if nstates == 1 then
  redis.call('HSET', KEYS[4], ckpt, ARGV[21])
else
  local states = {}
  for k = 1, nstates - 1 do
    states[#states + 1] = ckpt .. '.' .. (k - 1); states[#states + 1] = ARGV[20 + k]
  end
  states[#states + 1] = ckpt; states[#states + 1] = ARGV[20 + nstates]
  redis.call('HSET', KEYS[4], unpack(states))
end
local i = 21 + nstates
for _ = 1, nfinals do
  set[#set + 1] = 'out:' .. ARGV[i + 1]; set[#set + 1] = ARGV[i + 2]
  i = i + 2
end
i = i + 1
if ARGV[13] ~= '0' then redis.call('HINCRBY', KEYS[2], 'in_tokens', ARGV[13]) end
if ARGV[14] ~= '0' then redis.call('HINCRBY', KEYS[2], 'out_tokens', ARGV[14]) end

local refs = {}
local function ref(x)
  if x == '0' then return ckpt end
  return refs[tonumber(x)]
end

local delta = -1
local function fire(frame, key)
  local f = redis.call('HMGET', KEYS[5], frame .. ':base', frame .. ':tok', frame .. ':depth')
  redis.call('XADD', KEYS[key], '*', 'run', run, 'v', version, 'ckpt', f[1], 'tok', f[2], 'join', frame, 'd', f[3] or nextdepth, unpack(trace))
  delta = delta + 1
end
local function done(frame, key)
  local d = redis.call('HINCRBY', KEYS[5], frame .. ':d', 1)
  local want = tonumber(redis.call('HGET', KEYS[5], frame .. ':n'))
  if want and d == want then fire(frame, key) end
end

i = i + 1
for _ = 1, ntrans do
  local op = ARGV[i]
  local n = arity[op] -- checked above
  if op == 'A' then
    redis.call('XADD', KEYS[tonumber(ARGV[i + 1])], '*', 'run', run, 'v', version, 'ckpt', ref(ARGV[i + 2]), 'tok', ARGV[i + 3], 'd', nextdepth, unpack(trace))
    delta = delta + 1
  elseif op == 'S' then
    local id = redis.call('XADD', KEYS[3], '*', 'n', node, 'p', ckpt, 'c', ARGV[i + 1], 'k', '1', 's', tostring(steps), 't', now)
    redis.call('HSET', KEYS[4], id, ARGV[i + 2])
    refs[#refs + 1] = id
  elseif op == 'O' then
    local frame, count = ARGV[i + 1], tonumber(ARGV[i + 2])
    redis.call('HSET', KEYS[5], frame .. ':n', ARGV[i + 2], frame .. ':d', '0', frame .. ':tok', ARGV[i + 3], frame .. ':base', ref(ARGV[i + 4]), frame .. ':depth', nextdepth)
    if count == 0 then fire(frame, tonumber(ARGV[i + 5])) end
  elseif op == 'P' then
    redis.call('HINCRBY', KEYS[5], ARGV[i + 1] .. ':n', ARGV[i + 2])
  elseif op == 'R' then
    redis.call('HSET', KEYS[5], ARGV[i + 1] .. ':b:' .. ARGV[i + 2], ref(ARGV[i + 3]))
    done(ARGV[i + 1], tonumber(ARGV[i + 4]))
  elseif op == 'G' then
    done(ARGV[i + 1], tonumber(ARGV[i + 2]))
  elseif op == 'C' then
    local prefix = ARGV[i + 1] .. ':'
    for _, f in ipairs(redis.call('HKEYS', KEYS[5])) do
      if string.sub(f, 1, #prefix) == prefix then redis.call('HDEL', KEYS[5], f) end
    end
  elseif op == 'W' then
    -- The activation stays live while it waits for a person.
    delta = delta + 1
    parked = parked + 1
    set[#set + 1] = 'parked'; set[#set + 1] = parked
    set[#set + 1] = 'wait:' .. node; set[#set + 1] = ARGV[i + 1]
    set[#set + 1] = 'waitckpt:' .. node; set[#set + 1] = ckpt
    if ARGV[i + 2] ~= '0' then redis.call('ZADD', KEYS[8], ARGV[i + 2], run .. ' ' .. node) end
  end
  i = i + n + 1
end

consume()
live = live + delta
set[#set + 1] = 'steps'; set[#set + 1] = steps
set[#set + 1] = 'live'; set[#set + 1] = live
set[#set + 1] = 'last_ckpt'; set[#set + 1] = ckpt
if status == 'queued' then set[#set + 1] = 'started_at'; set[#set + 1] = now end
if status ~= 'failed' then
  if live <= 0 then
    -- Nothing is live, but a branch in the dead letters means the run did not succeed.
    if dead > 0 then
      set[#set + 1] = 'error'; set[#set + 1] = dead .. ' activation(s) of this run are in the dead letters'
      finish('failed')
    else
      finish('succeeded')
    end
  elseif live <= parked then
    newstatus = 'waiting'
  else
    newstatus = 'running'
  end
  if newstatus ~= status and newstatus ~= 'succeeded' and newstatus ~= 'failed' then
    set[#set + 1] = 'status'; set[#set + 1] = newstatus
  end
elseif live <= 0 and dead <= 0 then
  redis.call('DEL', KEYS[5])
end
local changed = ''
if newstatus ~= status then changed = newstatus end
redis.call('XADD', KEYS[6], 'MAXLEN', '~', maxlen, '*', 'type', 'steps', 'run', run, 'node', changed, 'data', ARGV[15], 'ckpt', ckpt, 'step', tostring(first))
redis.call('HSET', KEYS[2], unpack(set))
if live <= 0 then expire_run() end
return {'ok', ckpt, steps, live, newstatus}
