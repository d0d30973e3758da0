-- limit_pause.lua: pauses a provider's model for every process after it answered 429
-- with Retry-After. A pause is only ever lengthened.
--
-- KEYS[1] -> the pause key (value: until, ms of the Redis server's clock)
--
-- ARGV[1] -> how long, ms
--
-- Returns the pause's end, ms.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local untilms = now + tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if cur >= untilms then
  return cur
end
redis.call('SET', KEYS[1], untilms, 'PX', tonumber(ARGV[1]))
return untilms
