-- limit_take.lua: takes a slot of a shared rate limit (a sliding window log), or says how
-- long to wait. A slot counts against its window from the moment it is taken until a
-- window after its request's answer began (limit_mark.lua moves it there): the
-- provider saw the request before its answer began, so however late or early requests
-- travel, the provider never sees more than the limit in any window. A slot whose
-- holder died counts until its lease ends, then for one more window.
--
-- Every scope (the provider's limit, and a model's own) is checked; the slot is taken in
-- all of them or in none. Time is the Redis server's, so processes need no common clock.
--
-- KEYS[1]       -> the pause key of the provider and model (Retry-After), value: until ms
-- KEYS[2n]      -> scope n's slots: sorted set, member slot id, score ms it counts from
-- KEYS[2n+1]    -> scope n's tokens: hash, slot id -> tokens
--
-- ARGV[1]       -> slot id
-- ARGV[2]       -> tokens the request is estimated to take
-- ARGV[3]       -> lease, ms: how long a slot in flight is held at most
-- ARGV[3n+1]    -> scope n's window, ms
-- ARGV[3n+2]    -> scope n's most requests per window (0: no limit)
-- ARGV[3n+3]    -> scope n's most tokens per window (0: no limit)
--
-- Returns {1} when the slot was taken, else {0, wait ms, in flight}: in flight is 1 when
-- the wait ends only when a request still in flight answers (poll), 0 when it is exact.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id, want, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local paused = tonumber(redis.call('GET', KEYS[1]) or '0')
if paused > now then
  return {0, paused - now, 0}
end

local scopes = (#KEYS - 1) / 2
local wait, inflight = 0, 0
for n = 1, scopes do
  local slots, toks = KEYS[2 * n], KEYS[2 * n + 1]
  local window = tonumber(ARGV[3 * n + 1])
  local maxreq, maxtok = tonumber(ARGV[3 * n + 2]), tonumber(ARGV[3 * n + 3])
  -- Slots whose window has passed leave.
  local gone = redis.call('ZRANGEBYSCORE', slots, '-inf', now - window)
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', slots, '-inf', now - window)
    -- In chunks: unpack has a bound (8000 values on Redis, fewer on the embedded one),
    -- and a busy limit can see more slots leave at once after a quiet spell.
    for j = 1, #gone, 500 do
      redis.call('HDEL', toks, unpack(gone, j, math.min(j + 499, #gone)))
    end
  end
  local count = redis.call('ZCARD', slots)
  if maxreq > 0 and count >= maxreq then
    -- The (count - maxreq + 1)th oldest slot must leave first.
    local s = redis.call('ZRANGE', slots, count - maxreq, count - maxreq, 'WITHSCORES')
    local at = tonumber(s[2]) + window
    if at - now > wait then
      wait = at - now
      inflight = (tonumber(s[2]) > now) and 1 or 0
    end
  end
  if maxtok > 0 and count > 0 then
    local all = redis.call('ZRANGE', slots, 0, -1, 'WITHSCORES')
    local sum = 0
    local amounts = {}
    for i = 1, #all, 2 do
      local a = tonumber(redis.call('HGET', toks, all[i]) or '0')
      amounts[#amounts + 1] = a
      sum = sum + a
    end
    -- A request larger than the whole limit goes alone, when the window is empty.
    if sum + want > maxtok then
      local need = sum + want - maxtok
      local freed = 0
      for i = 1, #amounts do
        freed = freed + amounts[i]
        if freed >= need or i == #amounts then
          local score = tonumber(all[2 * i])
          local at = score + window
          if at - now > wait then
            wait = at - now
            inflight = (score > now) and 1 or 0
          end
          break
        end
      end
    end
  end
end
if wait > 0 then
  return {0, wait, inflight}
end

for n = 1, scopes do
  local slots, toks = KEYS[2 * n], KEYS[2 * n + 1]
  local window = tonumber(ARGV[3 * n + 1])
  redis.call('ZADD', slots, now + lease, id)
  redis.call('HSET', toks, id, want)
  redis.call('PEXPIRE', slots, lease + window)
  redis.call('PEXPIRE', toks, lease + window)
end
return {1}
