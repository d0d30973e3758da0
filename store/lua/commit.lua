-- commit.lua: commits a batch of steps — each one step of a run, or a few pure steps in
-- a row, fused — all of them in one atomic script call, so that the call's fixed cost
-- (the script's lookup, its KEYS and ARGV tables, the reply) is shared by every commit of
-- a worker's read batch. Every commit is checked before anything is written, and each is
-- decided on its own: one whose fence fails is "stale" while the others commit.
--
-- KEYS[1] -> events stream of the flow's partition
-- KEYS[2] -> results stream
-- KEYS[3] -> waits sorted set
-- KEYS[4] -> expiry sorted set (finished runs by the time their keys expire)
-- then, for commit c (1-based), five keys from KEYS[5 + 5(c-1)]:
--   +0 the node's stream (holds the consumed entry), +1 run hash, +2 checkpoint stream
--   of the run, +3 state hash of the run (checkpoint id -> state JSON), +4 frames hash
--   of the run (open forks)
-- then the streams the commits' transitions add activations to, named by index
--
-- ARGV[1] -> consumer group
-- ARGV[2] -> now, unix ms
-- ARGV[3] -> events stream MAXLEN (approximate)
-- ARGV[4] -> max_steps: the deepest an activation may be (the loop guard)
-- ARGV[5] -> seconds a finished run is kept ("0": forever)
-- ARGV[6] -> keep_last: checkpoints kept when the run finishes ("0": all)
-- ARGV[7] -> when a run finishing now expires, unix ms (its score in the expiry set)
--            (the settings are the flow's: the commits of one call share them)
-- ARGV[8] -> n, the number of commits
-- ARGV[9] -> consumer name: each entry must still be pending for it (the fence); the
--            commits of one call are one consumer's
-- then each commit's arguments, from its first (+0):
-- +0 -> entry id
-- +1 -> run id
-- +2 -> depth after the steps: the consumed activation's depth (steps along its line
--       since the run started) plus s, the depth of the activations the commit adds
-- +3 -> s, the number of steps committed (the first ran the consumed activation, each
--       further one the single successor of the one before)
-- +4 -> the steps' live events: a JSON array, one object per step
-- +5, +6 -> the first and the last step's node ids
-- +7 -> the parent checkpoint of the first step
-- +8 -> the steps' checkpoints, packed (see store/checkpoints.go): one entry holds
--       them all; step k of s gets the id "<entry>.<k-1>", the last the entry's id
-- +9 -> with keep_last "0": the last step's state JSON (only the last step's: a fused
--       step's state is computed from the updates when asked for); with keep_last set:
--       m (s: each step's), then the m states
-- then t, the number of ops, then each: an op code and its arguments. The steps' own:
--   F NODE VALUE              the value of an output node (part of the run's output)
--   T IN OUT                  the input and output tokens the steps spent
--   U BODY TURN               a turn of the first step saved with the commit (before any
--                             other op): a checkpoint entry of kind "turn" (packed BODY)
--                             and a live "turn" event (TURN), written as turn.lua writes
--                             them, before the steps' checkpoint entry
-- then the transitions after the last step:
--   A KEY REF TOK             activate: an activation on KEYS[KEY] reading REF
--   S BODY STATE              a fanout seed checkpoint after the last step; it becomes ref k
--   B NODE K BODY EVENTS STATE REF  K steps run inline along a branch of a fork the last
--                             step opened: one checkpoint entry (node NODE, the last's;
--                             packed BODY; parent REF, the checkpoint its first step read:
--                             "0" the last step's, k a seed before it; its steps numbered
--                             on from the run's steps, which count them), the last one's
--                             STATE ("" for none: it is computed when asked, as a fused
--                             step's), the steps' live EVENTS (an entry of their own in the
--                             call's events, after the commit's); it becomes ref k too, and
--                             an A reading it is K steps deeper than the commit's others
--   J NODE K BODY EVENTS STATE REFS  the join of a fork the last step opened ran in this
--                             commit, every branch having reached it here, with K-1 pure
--                             steps after it: one checkpoint entry like a B's (its parent
--                             the last step's checkpoint, the run's last checkpoint), whose
--                             first step's branches ("br", put first in the first body)
--                             are the checkpoints REFS names ("0" the last step, k the k-th
--                             seed or branch; comma-separated, in branch order); STATE is
--                             stored; it becomes ref k like a B. The fork never reaches
--                             the frames hash: the commit has no O, R or G of it
--   O FRAME N TOK REF KEY     open a fork with N branches; TOK is the stack outside it,
--                             REF its base checkpoint, KEY the join's stream
--   P FRAME N                 the current branch of FRAME became N+1 branches
--   R FRAME BRANCH REF KEY    a branch reached FRAME's join with checkpoint REF
--   G FRAME KEY               a branch of FRAME ended elsewhere
--   C FRAME                   the join of FRAME ran: forget the fork
--   W RECORD DEADLINE         the last step parks the run for a person (deadline ms, 0: none)
-- A commit whose entry id is "" starts a fresh run too (its steps ran in the process that
-- started the run, without an activation): it has no entry to fence or acknowledge, its
-- first op is N, and its H ops are the run hash's fields (store/startfold.go):
--   N CKPT NODE PARENT BODY STATE INPUT VERSION TP RUNS
--                             the run's first checkpoint CKPT (an id the caller chose; its
--                             node, parent and packed body), the state kept under it ("":
--                             the input), the run's INPUT ("" for none), its VERSION and
--                             traceparent TP ("" for none); KEYS[RUNS] is the partition's
--                             runs set. A run that exists already (the same start sent
--                             again after a lost reply: its checkpoint stream refuses the
--                             id) is "dropped" with its status.
--   H FIELD VALUE             another field of the run hash a start writes (webhook, trigger,
--                             ...; the script writes its version and created_at)
--   A REF is "0" (the last step's checkpoint) or "k" (the k-th seed, branch or join of this
--   commit).
--   Every op is checked — its code, its number of arguments, that its KEY names one of
--   the transition streams, that its REF names a seed before it, that its counts are
--   integers, and that nothing is left over — before anything is written: Redis does
--   not roll back a script that stops with an error, so a bad op found halfway would
--   leave half a commit behind.
--
-- The fence: each commit's entry must still be pending to the committing consumer; an
-- entry twice in one call commits once. store/commit.go puts a call's commits of one
-- stream in a row, in the order of their entries, and one XPENDING over their range
-- (FIRST LAST COUNT) fences them all; an entry the reply does not show, or a range
-- holding more pending entries than asked for, is checked alone (one XPENDING of the
-- entry).
--
-- Forks: the run hash's forks says the run has a frames hash; openf counts its forks
-- open, so that the join of its only open fork deletes the frames hash with one DEL (a
-- run whose forks an older build opened has no count: its join deletes its fork's
-- fields one by one, and its end the hash).
--
-- Consumed entries are acknowledged together at the end, one XACK per stream, and each
-- stream is trimmed (XTRIM MINID ~) below its oldest pending entry, or below the newest
-- entry acknowledged when none is pending: everything before that was delivered and
-- acknowledged. An approximate trim drops whole listpack nodes only, so it costs next
-- to nothing (an XDEL walks the entry's node over every entry deleted in it); a drained
-- stream may so keep up to stream-node-max-entries acknowledged entries, and "drained"
-- means nothing pending and nothing after the group's last delivered entry.
--
-- Events: one entry per call. For one commit, type "steps": its data the steps' events,
-- its ckpt the checkpoint entry's id, its step the first step's number, and its node the
-- run's new status when it changed ("" otherwise). For several, type "batch": its data a
-- JSON array of the commits, each {"r": run, "st": new status or "", "c": checkpoint
-- entry, "s": first step, "e": the steps' events}. The store splits either into one event
-- per step (and one for the run) when reading (store/events.go).
--
-- ARITY (the ops' numbers of arguments) and the replies OK, STALE, DROPPED and MAX_STEPS
-- are defined by the prelude store/ops.go puts before this script.
--
-- Returns the commits' replies in order, in one flat array: "ok", last checkpoint id,
-- step number, live activations, run status; or "stale" when the fence fails;
-- "dropped", status for a cancelled or lost run; "max_steps", depth when the activation
-- is deeper than max_steps (the run fails). The first value says how many follow.

local group, now, maxlen = ARGV[1], ARGV[2], ARGV[3]
local maxsteps, ttl, keeplast, expireat = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local maxdepth = tonumber(maxsteps)
local ncommits = tonumber(ARGV[8])
local consumer = ARGV[9]
local keep = tonumber(keeplast)
if not ncommits or not maxdepth or not keep then return redis.error_reply('commit.lua: max_steps, keep_last or the number of commits is not a number') end
local firstextra = 5 + 5 * ncommits -- the first transition stream's index in KEYS

-- The transitions and the counts before them are checked before the first write. The
-- check runs on every commit, so it is written for speed: no tables or closures, and
-- the offsets it finds are kept for the writes below.
-- refnum is ref x as a number, or nil: a ref is "0" or a number written plainly (the
-- writes compare it with "0" as text).
local function refnum(x)
  if x == '0' then return 0 end
  return string.match(x, '^[1-9]%d*$') and tonumber(x)
end

local starts, states, sfirst, transs = {}, {}, {}, {}
-- Each commit's depth and number of steps, as numbers; keyat[j] is the KEYS index that
-- argument j names (a transition's KEY), as a number.
local depths, nstepss, keyat = {}, {}, {}
-- startat[c] is the index of commit c's N op when it starts a fresh run; newrunskey is
-- the KEYS index of the runs set the call's starts name (a call's commits are one
-- partition's: they name one).
local startat, newrunskey = {}, nil
do
  local nargv = #ARGV
  local i = 10
  for c = 1, ncommits do
    starts[c] = i
    local nstates, si = 1, i + 9
    if keep ~= 0 then
      nstates, si = tonumber(ARGV[i + 9]), i + 10
      if not nstates or nstates < 1 then return redis.error_reply('commit.lua: commit ' .. c .. ': the number of states is not a number') end
    end
    local ti = si + nstates
    local nt = tonumber(ARGV[ti])
    if not nt then return redis.error_reply('commit.lua: commit ' .. c .. ': the number of ops is not a number') end
    states[c], sfirst[c], transs[c] = nstates, si, nt
    if ARGV[i] == '' and ARGV[ti + 1] ~= 'N' then
      return redis.error_reply('commit.lua: commit ' .. c .. ' has no entry and does not start a run (N)')
    end
    local d, ns = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
    if not d or not ns then
      return redis.error_reply('commit.lua: commit ' .. c .. ': depth or steps is not a number')
    end
    depths[c], nstepss[c] = d - ns, ns
    i = ti + 1
    local seeds, prev = 0, nil
    for k = 1, nt do
      local op = ARGV[i]
      local n = ARITY[op]
      if not n then
        return redis.error_reply('commit.lua: unknown transition ' .. tostring(op) .. ' (transition ' .. k .. ' of ' .. nt .. ')')
      end
      if i + n > nargv then
        return redis.error_reply('commit.lua: transition ' .. op .. ' needs ' .. n .. ' arguments (transition ' .. k .. ' of ' .. nt .. ')')
      end
      -- The stream it adds to (an index into KEYS), the checkpoint it reads (0, or a seed
      -- before it) and its count, where it has them.
      local ki, ref, count
      if op == 'A' then ki, ref = i + 1, ARGV[i + 2]
      elseif op == 'S' then seeds = seeds + 1
      elseif op == 'B' then ref, count = ARGV[i + 6], ARGV[i + 2]
      elseif op == 'J' then
        local body, nrefs = ARGV[i + 3], 0
        for x in string.gmatch(ARGV[i + 6], '[^,]+') do
          local q = refnum(x)
          if not q or q > seeds then
            return redis.error_reply('commit.lua: transition J reads checkpoint ' .. x .. ', but the commit has ' .. seeds .. ' seed(s) before it')
          end
          nrefs = nrefs + 1
        end
        if nrefs == 0 or ARGV[i + 5] == '' or not (string.sub(body, 1, 2) == '{"' or string.sub(body, 1, 3) == '[{"') then
          return redis.error_reply('commit.lua: transition J needs its branches, its state and a body of objects')
        end
        seeds, count = seeds + 1, ARGV[i + 2]
      elseif op == 'O' then ki, ref, count = i + 5, ARGV[i + 4], ARGV[i + 2]
      elseif op == 'P' then count = ARGV[i + 2]
      elseif op == 'R' then ki, ref = i + 4, ARGV[i + 3]
      elseif op == 'G' then ki = i + 2
      elseif op == 'W' then count = ARGV[i + 2]
      elseif op == 'H' and not startat[c] then
        return redis.error_reply('commit.lua: commit ' .. c .. ': a run hash field (H) in a commit that starts no run')
      elseif op == 'N' then
        if k ~= 1 or ARGV[starts[c]] ~= '' then
          return redis.error_reply('commit.lua: commit ' .. c .. ': a start (N) must be the first op of a commit without an entry')
        end
        if depths[c] > maxdepth then
          return redis.error_reply('commit.lua: commit ' .. c .. ': a start deeper than max_steps')
        end
        ki = i + 9
        startat[c] = i
      elseif op == 'T' then
        count = ARGV[i + 1]
        if not tonumber(ARGV[i + 2]) then count = ARGV[i + 2] end
      elseif op == 'U' and (prev ~= 'U' and k ~= 1 or ARGV[starts[c]] == '') then
        return redis.error_reply('commit.lua: commit ' .. c .. ': a turn (U) after another op, or in a commit without an entry')
      end
      if ki then
        local key = ARGV[ki]
        local x = tonumber(key)
        if not x or x < firstextra or not KEYS[x] then
          return redis.error_reply('commit.lua: transition ' .. op .. ' names stream ' .. key .. ', which is not one of KEYS[' .. firstextra .. '..' .. #KEYS .. ']')
        end
        keyat[ki] = x
        if op == 'N' then
          if newrunskey and newrunskey ~= x then
            return redis.error_reply('commit.lua: the starts of one call name two runs sets')
          end
          newrunskey = x
        end
      end
      if ref and ref ~= '0' then
        local x = refnum(ref)
        if not x or x > seeds then
          return redis.error_reply('commit.lua: transition ' .. op .. ' reads checkpoint ' .. ref .. ', but the commit has ' .. seeds .. ' seed(s) before it')
        end
      end
      if count and not tonumber(count) then
        return redis.error_reply('commit.lua: transition ' .. op .. ': ' .. count .. ' is not a number')
      end
      if op == 'B' then seeds = seeds + 1 end
      prev = op
      i = i + n + 1
    end
  end
  if i ~= nargv + 1 then
    return redis.error_reply('commit.lua: ' .. (nargv + 1 - i) .. ' argument(s) left after the transitions: an op was short of arguments')
  end
  if #KEYS < firstextra - 1 then
    return redis.error_reply('commit.lua: ' .. ncommits .. ' commits need ' .. (firstextra - 1) .. ' keys, given ' .. #KEYS)
  end
end

-- The fence of the commits of one stream that are in a row (store/commit.go puts a
-- call's commits of one stream in a row, in the order of their entries): one XPENDING
-- over their range gives each entry's consumer, instead of one XPENDING each. A range
-- holding more pending entries than asked for, or an entry it does not show, is
-- checked alone below.
local owner = {}
do
  local c = 1
  while c <= ncommits do
    local kin = KEYS[5 + 5 * (c - 1)]
    local e = c
    -- A start (startat) has no entry to fence.
    while not startat[c] and e < ncommits and KEYS[5 + 5 * e] == kin and not startat[e + 1] do e = e + 1 end
    if e > c then
      local count = 2 * (e - c + 1) + 16
      local p = redis.call('XPENDING', kin, group, ARGV[starts[c]], ARGV[starts[e]], count)
      if #p < count then
        local who = {}
        for _, x in ipairs(p) do who[x[1]] = x[2] end
        for q = c, e do owner[q] = who[ARGV[starts[q]]] end
      end
    end
    c = e + 1
  end
end

-- The entries to acknowledge, by stream, and the ones fenced in this call (an entry
-- twice in one batch commits once).
local ackstreams, ackids, fenced = {}, {}, {}
-- Runs that finished in this call, for one ZADD to the expiry set: score, run, ...
local expiring = {}
-- Runs started in this call, for one ZADD to the runs set (KEYS[newrunskey]): score,
-- run, ...
local newruns = {}
-- The committed steps' events: run, its new status or "", checkpoint entry, first step,
-- the steps' events JSON.
local events = {}

-- The helpers below are functions of the script, not of each commit: a closure made per
-- commit costs its allocation and an upvalue walk for every local it reads.

-- consume notes that entry of stream kin is to be acknowledged.
local function consume(kin, entry)
  if entry == '' then return end -- a start: nothing was read
  local ids = ackids[kin]
  if not ids then
    ids = {}
    ackids[kin] = ids
    ackstreams[#ackstreams + 1] = kin
  end
  ids[#ids + 1] = entry
end

-- expire_run starts the retention of a run nothing is live in (its frames are gone):
-- the expiry set says when it ends, and the janitor (prune.lua) deletes the run's keys
-- then. One ZADD per call for every run that finished in it, where an EXPIRE of each
-- key cost three calls more per run.
local function expire_run(run)
  if ttl ~= '0' then
    expiring[#expiring + 1] = expireat
    expiring[#expiring + 1] = run
  end
end

-- finish ends a run with status st: its result, its frames (unless a dead letter may
-- still arrive at a join, or none is left), keep_last. set takes the run hash's fields.
local function finish(st, run, set, kframes, kckpt, kstate, frames, dead)
  set[#set + 1] = 'status'; set[#set + 1] = st
  set[#set + 1] = 'finished_at'; set[#set + 1] = now
  redis.call('XADD', KEYS[2], '*', 'run', run, 'status', st)
  -- A run with dead letters keeps its open forks: a retried one arrives at its join.
  if frames and dead <= 0 then redis.call('DEL', kframes) end
  if keep > 0 then
    -- Keep the last keep checkpoints. Entries older than the one that holds the oldest
    -- of them go; in that entry (a packed commit), the states of the steps before it go,
    -- and kept_from tells readers where the kept history starts.
    local have = 0
    for _, e in ipairs(redis.call('XREVRANGE', kckpt, '+', '-')) do
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
          redis.call('HDEL', kstate, e[1])
        else
          redis.call('HDEL', kstate, e[1] .. '.' .. q)
        end
      end
      if drop == cnt then redis.call('XDEL', kckpt, e[1]) end
      have = have + cnt
    end
  end
end

-- fire activates the join of frame on stream KEYS[key].
local function fire(kframes, frame, key, run, version, nextdepth, tp)
  local f = redis.call('HMGET', kframes, frame .. ':base', frame .. ':tok', frame .. ':depth')
  if tp then
    redis.call('XADD', KEYS[key], '*', 'run', run, 'v', version, 'ckpt', f[1], 'tok', f[2], 'join', frame, 'd', f[3] or nextdepth, 'tp', tp)
  else
    redis.call('XADD', KEYS[key], '*', 'run', run, 'v', version, 'ckpt', f[1], 'tok', f[2], 'join', frame, 'd', f[3] or nextdepth)
  end
end

-- done counts a branch of frame in (arrived or given back) and fires its join when it
-- was the last; it returns the activations added (0 or 1).
local function done(kframes, frame, key, run, version, nextdepth, tp)
  local d = redis.call('HINCRBY', kframes, frame .. ':d', 1)
  local want = tonumber(redis.call('HGET', kframes, frame .. ':n'))
  if want and d == want then
    fire(kframes, frame, key, run, version, nextdepth, tp)
    return 1
  end
  return 0
end

-- commit commits the c-th commit; b is the index of its first key minus one, a of its
-- first argument. It returns its reply's values (not a table: see the replies below).
local function commit(c, b, a)
local KIN, KRUN, KCKPT, KSTATE, KFRAMES = KEYS[b + 1], KEYS[b + 2], KEYS[b + 3], KEYS[b + 4], KEYS[b + 5]
local entry, run = ARGV[a], ARGV[a + 1]
local depth, nsteps = depths[c], nstepss[c]
local nstates, ntrans, si = states[c], transs[c], sfirst[c]

local st = startat[c]
if not st then
  local fk = fenced[KIN]
  if not fk then
    fk = {}
    fenced[KIN] = fk
  end
  if fk[entry] then return STALE end
  local o = owner[c]
  if not o then
    local p = redis.call('XPENDING', KIN, group, entry, entry, 1)
    if #p > 0 then o = p[1][2] end
  end
  if o ~= consumer then
    return STALE
  end
  fk[entry] = true
end

-- The run is read once and written once: the script runs atomically. A start's run is
-- new: its first write, the first checkpoint under the id the start chose, is refused
-- when the run exists (this start sent again: its checkpoint stream holds that id).
local r
if not st then
  r = redis.call('HMGET', KRUN, 'status', 'version', 'steps', 'live', 'parked', 'dead', 'tp', 'forks', 'openf')
else
  local x = redis.pcall('XADD', KCKPT, ARGV[st + 1], 'n', ARGV[st + 2], 'p', ARGV[st + 3], 'c', ARGV[st + 4], 'k', '1', 's', '0', 't', now)
  if type(x) == 'table' and x.err then
    return DROPPED, redis.call('HGET', KRUN, 'status') or 'lost'
  end
  r = {}
end
-- forks is set once the run opened a fork: a run that never did has no frames hash to
-- delete when it ends. openf counts the forks open (opened, their join not yet run) of
-- a run that opened its first fork with this count kept; it is unknown (nil) for a run
-- whose forks an older build opened.
local forks = r[8]
local openf
if r[9] then openf = tonumber(r[9]) elseif not forks then openf = 0 end
local status, version = r[1], r[2]
-- A traced run's activations carry its traceparent ("tp"), so that the steps of the
-- run form one trace in whatever process they run; an untraced run's carry nothing.
local tp = r[7]
local live = 0
if r[4] then live = tonumber(r[4]) end
-- A start's state hash fields (its first state, and its input).
local started
if st then
  -- A fresh run: queued, with the activation its steps ran as its one live activation.
  local sckpt, input = ARGV[st + 1], ARGV[st + 6]
  status, version, live, openf = 'queued', ARGV[st + 7], 1, 0
  if ARGV[st + 8] ~= '' then tp = ARGV[st + 8] end
  newruns[#newruns + 1] = now; newruns[#newruns + 1] = run
  started = {sckpt, ARGV[st + 5]}
  if input ~= '' then started[3] = 'input'; started[4] = input end
end

if not status or status == 'cancelled' or status == 'succeeded' then
  -- A cancelled run drops its activations; a lost run (expired, or Redis lost it)
  -- cannot continue; a succeeded run has nothing live.
  consume(KIN, entry)
  if status then
    live = redis.call('HINCRBY', KRUN, 'live', -1)
    if live <= 0 then expire_run(run) end
  end
  return DROPPED, status or 'lost'
end

local steps, parked, dead = 0, 0, 0
if r[3] then steps = tonumber(r[3]) end
if r[5] then parked = tonumber(r[5]) end
if r[6] then dead = tonumber(r[6]) end
-- The frames hash may hold something: a fork was opened and, as far as is known, not
-- every one was closed.
local frames = forks and openf ~= 0

if depth > maxdepth then
  consume(KIN, entry)
  local set = {'updated_at', now, 'live', tostring(live - 1)}
  if status ~= 'failed' then
    set[#set + 1] = 'error'
    set[#set + 1] = 'the run went more than max_steps (' .. maxsteps .. ') steps deep: a loop that does not end?'
    set[#set + 1] = 'error_node'; set[#set + 1] = ARGV[a + 5]
    finish('failed', run, set, KFRAMES, KCKPT, KSTATE, frames, dead)
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxlen, '*', 'type', 'steps', 'run', run, 'node', 'failed', 'data', '[]', 'ckpt', '', 'step', '')
    expire_run(run)
  end
  redis.call('HSET', KRUN, unpack(set))
  return MAX_STEPS, depth
end

-- The steps: one checkpoint entry for all of them, a state each. A number becomes a
-- string by sprintf (in Lua, or in redis.call for a number argument): each is made once,
-- and a count that did not change is not written.
local node = ARGV[a + 6]
steps = steps + nsteps
local stepss = tostring(steps)
local firsts = stepss
if nsteps > 1 then firsts = tostring(steps - nsteps + 1) end
local nextdepth = ARGV[a + 2]
-- The first step's turns saved with the commit go before its checkpoint, as turn.lua
-- would have written them (they lead the ops: checked above).
do
  local i = si + nstates + 1
  while ARGV[i] == 'U' do
    local tid = redis.call('XADD', KCKPT, '*', 'n', ARGV[a + 5], 'p', ARGV[a + 7], 'c', ARGV[i + 1], 'k', '1', 's', '', 't', now)
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxlen, '*', 'type', 'turn', 'run', run, 'node', ARGV[a + 5], 'data', ARGV[i + 2], 'ckpt', tid, 'step', '')
    i = i + 3
  end
end
local ckpt = redis.call('XADD', KCKPT, '*', 'n', node, 'p', ARGV[a + 7], 'c', ARGV[a + 8], 'k', ARGV[a + 3], 's', firsts, 't', now)
-- Run hash fields written at the end: the first six always, nset in all.
local set = {'updated_at', now, 'steps', stepss, 'last_ckpt', ckpt}
local nset = 6
if st then
  set[7], set[8], set[9], set[10] = 'version', version, 'created_at', now
  nset = 10
end
if nstates == 1 and not started then
  redis.call('HSET', KSTATE, ckpt, ARGV[si])
else
  -- Each step's state (keep_last), after a start's first state and input.
  local sts = started or {}
  for k = 1, nstates - 1 do
    sts[#sts + 1] = ckpt .. '.' .. (k - 1); sts[#sts + 1] = ARGV[si + k - 1]
  end
  sts[#sts + 1] = ckpt; sts[#sts + 1] = ARGV[si + nstates - 1]
  redis.call('HSET', KSTATE, unpack(sts))
end
local refs -- the seeds' and branches' checkpoint ids, when the commit has any
local refk -- a branch ref's number of steps, when the commit has branches
local opened, openedby -- the forks this commit opens, in order and by frame
-- The commit's own events go before its branches' (its slot is filled at the end).
local evat = #events + 1
events[evat] = false
local delta = -1
local i = si + nstates + 1
for _ = 1, ntrans do
  local op = ARGV[i]
  local n = ARITY[op] -- checked above
  if op == 'P' or op == 'R' or op == 'G' then
    -- A branch of a fork: the run has a frames hash. A run said to have none open had
    -- its fork opened by an older build: its count is unknown from now on.
    frames = true
    if openf == 0 then openf = nil end
  end
  if not forks and (op == 'O' or op == 'P' or op == 'R' or op == 'G') then
    -- The run has a frames hash from now on (a run of an older build may have one
    -- already: its next fork op marks it).
    forks = '1'
    set[nset + 1] = 'forks'; set[nset + 2] = '1'; nset = nset + 2
  end
  if op == 'F' then
    set[nset + 1] = 'out:' .. ARGV[i + 1]; set[nset + 2] = ARGV[i + 2]; nset = nset + 2
  elseif op == 'H' then
    set[nset + 1] = ARGV[i + 1]; set[nset + 2] = ARGV[i + 2]; nset = nset + 2
  elseif op == 'T' then
    if ARGV[i + 1] ~= '0' then redis.call('HINCRBY', KRUN, 'in_tokens', ARGV[i + 1]) end
    if ARGV[i + 2] ~= '0' then redis.call('HINCRBY', KRUN, 'out_tokens', ARGV[i + 2]) end
  elseif op == 'A' then
    local x, from, d = ARGV[i + 2], ckpt, nextdepth
    if x ~= '0' then
      local q = tonumber(x)
      from = refs[q]
      if refk and refk[q] then d = tostring(depth + nsteps + refk[q]) end
    end
    if tp then
      redis.call('XADD', KEYS[keyat[i + 1]], '*', 'run', run, 'v', version, 'ckpt', from, 'tok', ARGV[i + 3], 'd', d, 'tp', tp)
    else
      redis.call('XADD', KEYS[keyat[i + 1]], '*', 'run', run, 'v', version, 'ckpt', from, 'tok', ARGV[i + 3], 'd', d)
    end
    delta = delta + 1
  elseif op == 'S' then
    local id = redis.call('XADD', KCKPT, '*', 'n', node, 'p', ckpt, 'c', ARGV[i + 1], 'k', '1', 's', stepss, 't', now)
    redis.call('HSET', KSTATE, id, ARGV[i + 2])
    if not refs then refs = {} end
    refs[#refs + 1] = id
  elseif op == 'B' or op == 'J' then
    -- Steps run inline along a branch (B) or at the fork's join (J): one checkpoint
    -- entry after the commit's, a ref of the commit.
    local k, body, from = ARGV[i + 2], ARGV[i + 3], ckpt
    local first = tostring(steps + 1)
    steps = steps + tonumber(k)
    if op == 'B' then
      if ARGV[i + 6] ~= '0' then from = refs[tonumber(ARGV[i + 6])] end
    else
      local br = {}
      for x in string.gmatch(ARGV[i + 6], '[^,]+') do
        if x == '0' then br[#br + 1] = ckpt else br[#br + 1] = refs[tonumber(x)] end
      end
      -- The join's branches go first in its body: a single step's body is an object, a
      -- packed one an array of them.
      local at = 1
      if string.byte(body, 1) == 91 then at = 2 end
      body = string.sub(body, 1, at) .. '"br":["' .. table.concat(br, '","') .. '"],' .. string.sub(body, at + 1)
    end
    local id = redis.call('XADD', KCKPT, '*', 'n', ARGV[i + 1], 'p', from, 'c', body, 'k', k, 's', first, 't', now)
    if ARGV[i + 5] ~= '' then redis.call('HSET', KSTATE, id, ARGV[i + 5]) end
    if not refs then refs = {} end
    if not refk then refk = {} end
    refs[#refs + 1] = id
    refk[#refs] = tonumber(k)
    if op == 'J' then set[6] = id end -- the run's last checkpoint
    events[#events + 1] = {run, '', id, first, ARGV[i + 4]}
  elseif op == 'O' then
    local frame, count = ARGV[i + 1], ARGV[i + 2]
    local x, base = ARGV[i + 4], ckpt
    if x ~= '0' then base = refs[tonumber(x)] end
    if openf then openf = openf + 1 end
    frames = true
    if count == '0' then
      redis.call('HSET', KFRAMES, frame .. ':n', count, frame .. ':d', '0', frame .. ':tok', ARGV[i + 3], frame .. ':base', base, frame .. ':depth', nextdepth)
      fire(KFRAMES, frame, keyat[i + 5], run, version, nextdepth, tp)
      delta = delta + 1
    else
      -- Written after the ops, with the branches that arrive in this commit (branches
      -- run inline) counted in: {frame, n, d, tok, base, join stream, arrivals, n as
      -- given}.
      local fr = {frame, tonumber(count), 0, ARGV[i + 3], base, keyat[i + 5], {}, count}
      if not opened then opened, openedby = {}, {} end
      opened[#opened + 1] = fr
      openedby[frame] = fr
    end
  elseif op == 'P' then
    local fr = openedby and openedby[ARGV[i + 1]]
    if fr then
      fr[2], fr[8] = fr[2] + tonumber(ARGV[i + 2]), nil
    else
      redis.call('HINCRBY', KFRAMES, ARGV[i + 1] .. ':n', ARGV[i + 2])
    end
  elseif op == 'R' then
    local x, from = ARGV[i + 3], ckpt
    if x ~= '0' then from = refs[tonumber(x)] end
    local fr = openedby and openedby[ARGV[i + 1]]
    if fr then
      local arr = fr[7]
      arr[#arr + 1] = ARGV[i + 1] .. ':b:' .. ARGV[i + 2]
      arr[#arr + 1] = from
      fr[3] = fr[3] + 1
    else
      redis.call('HSET', KFRAMES, ARGV[i + 1] .. ':b:' .. ARGV[i + 2], from)
      delta = delta + done(KFRAMES, ARGV[i + 1], keyat[i + 4], run, version, nextdepth, tp)
    end
  elseif op == 'G' then
    local fr = openedby and openedby[ARGV[i + 1]]
    if fr then
      fr[3] = fr[3] + 1
    else
      delta = delta + done(KFRAMES, ARGV[i + 1], keyat[i + 2], run, version, nextdepth, tp)
    end
  elseif op == 'C' then
    if openf == 1 then
      -- The only fork open: its fields are all the frames hash holds.
      redis.call('DEL', KFRAMES)
      openf, frames = 0, false
    else
      local prefix = ARGV[i + 1] .. ':'
      local gone = {}
      for _, f in ipairs(redis.call('HKEYS', KFRAMES)) do
        if string.sub(f, 1, #prefix) == prefix then gone[#gone + 1] = f end
      end
      if #gone > 0 then redis.call('HDEL', KFRAMES, unpack(gone)) end
      if openf and openf > 1 then openf = openf - 1 end
    end
  elseif op == 'W' then
    -- The activation stays live while it waits for a person.
    delta = delta + 1
    parked = parked + 1
    set[nset + 1] = 'parked'; set[nset + 2] = tostring(parked)
    set[nset + 3] = 'wait:' .. node; set[nset + 4] = ARGV[i + 1]
    set[nset + 5] = 'waitckpt:' .. node; set[nset + 6] = ckpt
    nset = nset + 6
    if ARGV[i + 2] ~= '0' then redis.call('ZADD', KEYS[3], ARGV[i + 2], run .. ' ' .. node) end
  end
  i = i + n + 1
end
if opened then
  -- The forks opened here, each in one HSET, and their joins activated when every
  -- branch arrived (or ended elsewhere) in this commit: done and fire without reading
  -- back what this commit wrote.
  for _, fr in ipairs(opened) do
    local f, base, tok = fr[1], fr[5], fr[4]
    local d = tostring(fr[3])
    redis.call('HSET', KFRAMES, f .. ':n', fr[8] or tostring(fr[2]), f .. ':d', d, f .. ':tok', tok, f .. ':base', base, f .. ':depth', nextdepth, unpack(fr[7]))
    if fr[3] == fr[2] then
      if tp then
        redis.call('XADD', KEYS[fr[6]], '*', 'run', run, 'v', version, 'ckpt', base, 'tok', tok, 'join', f, 'd', nextdepth, 'tp', tp)
      else
        redis.call('XADD', KEYS[fr[6]], '*', 'run', run, 'v', version, 'ckpt', base, 'tok', tok, 'join', f, 'd', nextdepth)
      end
      delta = delta + 1
    end
  end
end
if refk then
  -- Branches ran inline: the run's steps count theirs too.
  stepss = tostring(steps)
  set[4] = stepss
end
if openf and forks and (not r[9] or tonumber(r[9]) ~= openf) then
  set[nset + 1] = 'openf'; set[nset + 2] = tostring(openf); nset = nset + 2
end

consume(KIN, entry)
if delta ~= 0 or not r[4] then
  live = live + delta
  set[nset + 1] = 'live'; set[nset + 2] = tostring(live); nset = nset + 2
end
if status == 'queued' then set[nset + 1] = 'started_at'; set[nset + 2] = now; nset = nset + 2 end
local newstatus = status
if status ~= 'failed' then
  if live <= 0 then
    -- Nothing is live, but a branch in the dead letters means the run did not succeed.
    if dead > 0 then
      set[#set + 1] = 'error'; set[#set + 1] = dead .. ' activation(s) of this run are in the dead letters'
      newstatus = 'failed'
    else
      newstatus = 'succeeded'
    end
    finish(newstatus, run, set, KFRAMES, KCKPT, KSTATE, frames, dead)
  elseif live <= parked then
    newstatus = 'waiting'
  else
    newstatus = 'running'
  end
  if newstatus ~= status and newstatus ~= 'succeeded' and newstatus ~= 'failed' then
    set[#set + 1] = 'status'; set[#set + 1] = newstatus
  end
elseif live <= 0 and frames and dead <= 0 then
  redis.call('DEL', KFRAMES)
end
local changed = ''
if newstatus ~= status then changed = newstatus end
-- The run's new status goes with the commit's last events entry (its own, or its last
-- branch's or join's), so that readers hear of it after every step it committed.
events[evat] = {run, '', ckpt, firsts, ARGV[a + 4]}
events[#events][2] = changed
redis.call('HSET', KRUN, unpack(set))
if live <= 0 then expire_run(run) end
-- The run's last checkpoint: the commit's last step's, or its Joined's.
return OK, set[6], steps, live, newstatus
end


-- The commits, in order; then each stream's acknowledgements and trim.
-- The replies are one flat array, each commit's values after the one before's: Redis
-- turns each table a script returns into a reply by looking up six fields in it (err,
-- ok, double, ...) before its elements, so a table per commit cost more than its values.
local replies, nrep = {}, 0
for c = 1, ncommits do
  local x1, x2, x3, x4, x5 = commit(c, 4 + 5 * (c - 1), starts[c])
  replies[nrep + 1] = x1
  if x1 == OK then
    replies[nrep + 2], replies[nrep + 3], replies[nrep + 4], replies[nrep + 5] = x2, x3, x4, x5
    nrep = nrep + 5
  elseif x1 == STALE then
    nrep = nrep + 1
  else
    replies[nrep + 2] = x2
    nrep = nrep + 2
  end
end

if #expiring > 0 then redis.call('ZADD', KEYS[4], unpack(expiring)) end
if #newruns > 0 then redis.call('ZADD', KEYS[newrunskey], unpack(newruns)) end
-- One events entry for the batch: a commit's own ("steps") when it is alone, else one
-- ("batch") whose data lists the commits, each as its own entry's fields would be.
if #events == 1 then
  local e = events[1]
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxlen, '*', 'type', 'steps', 'run', e[1], 'node', e[2], 'data', e[5], 'ckpt', e[3], 'step', e[4])
elseif #events > 1 then
  local parts = {}
  for j, e in ipairs(events) do
    parts[j] = '{"r":"' .. e[1] .. '","st":"' .. e[2] .. '","c":"' .. e[3] .. '","s":' .. e[4] .. ',"e":' .. e[5] .. '}'
  end
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxlen, '*', 'type', 'batch', 'run', '', 'node', '', 'data', '[' .. table.concat(parts, ',') .. ']', 'ckpt', '', 'step', '')
end

for _, key in ipairs(ackstreams) do
  local ids = ackids[key]
  redis.call('XACK', key, group, unpack(ids))
  local p = redis.call('XPENDING', key, group, '-', '+', 1)
  -- Nothing pending: trim below the last entry acknowledged, the newest (the commits of
  -- a stream come in entry order; were they not, this trims less, never too much).
  local min = ids[#ids]
  if #p > 0 then min = p[1][1] end
  redis.call('XTRIM', key, 'MINID', '~', min)
end
return replies
