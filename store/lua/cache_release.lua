-- cache_release.lua: releases a cache computation's single-flight lock, but only for
-- its owner: a holder whose lock expired (and was taken by another process) must not
-- delete the new holder's lock.
--
-- KEYS[1] -> the lock (Keys.Lock)
--
-- ARGV[1] -> the owner's random token
--
-- Returns 1 when the lock was released, 0 when it was not this owner's.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
