-- limit_mark.lua: records what happened to a slot limit_take.lua gave out: its request's
-- answer began now (the slot counts from now on for one window), and/or its request
-- took this many tokens. A slot that already left is not brought back.
--
-- KEYS[2n-1]    -> scope n's slots (sorted set)
-- KEYS[2n]      -> scope n's tokens (hash)
--
-- ARGV[1]       -> slot id
-- ARGV[2]       -> "1" to mark the answer's beginning, "0" to leave the time alone
-- ARGV[3]       -> the tokens the request took, or "" to leave them alone
-- ARGV[3+n]     -> scope n's window, ms
--
-- Returns 1 when the slot was still there.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local found = 0
for n = 1, #KEYS / 2 do
  local slots, toks = KEYS[2 * n - 1], KEYS[2 * n]
  local window = tonumber(ARGV[3 + n])
  local score = redis.call('ZSCORE', slots, ARGV[1])
  if score then
    found = 1
    if ARGV[2] == '1' and tonumber(score) > now then
      redis.call('ZADD', slots, 'XX', now, ARGV[1])
    end
    if ARGV[3] ~= '' then
      redis.call('HSET', toks, ARGV[1], ARGV[3])
    end
    -- Keep the keys for as long as their newest slot counts.
    local last = redis.call('ZRANGE', slots, -1, -1, 'WITHSCORES')
    local keep = tonumber(last[2]) + window - now
    if keep > 0 then
      redis.call('PEXPIRE', slots, keep)
      redis.call('PEXPIRE', toks, keep)
    end
  end
end
return found
