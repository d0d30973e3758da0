-- cache_extend.lua: extends a cache computation's single-flight lock while its owner
-- still computes, so a long computation keeps the lock and a crashed one loses it soon.
--
-- KEYS[1] -> the lock (Keys.Lock)
--
-- ARGV[1] -> the owner's random token
-- ARGV[2] -> the new time to live, ms
--
-- Returns 1 when extended, 0 when the lock is no longer this owner's.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
