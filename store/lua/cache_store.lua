-- cache_store.lua: stores a computed result and releases the single-flight lock in one
-- step, so a waiter never sees the lock gone before the result is there. The lock is
-- deleted only if the caller still owns it: a holder whose lock expired must not delete
-- the lock of the process that took over (the result is the same, so it is stored
-- either way).
--
-- KEYS[1] -> the cached result (Keys.Cache)
-- KEYS[2] -> the lock (Keys.Lock)
--
-- ARGV[1] -> the owner's random token
-- ARGV[2] -> the result
-- ARGV[3] -> the result's time to live, ms
--
-- Returns 1 when the caller's lock was released, 0 when it was not the owner any more.

redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
