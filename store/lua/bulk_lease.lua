-- bulk_lease.lua: takes or keeps the lease of a bulk replay job. Only one process works
-- on a job at a time; one that dies loses the lease when it expires, and another (any
-- serve, or sluice replay again) takes the job over where it stopped.
--
-- KEYS[1] -> the job's lease
-- KEYS[2] -> the job's hash
--
-- ARGV[1] -> the taker's token
-- ARGV[2] -> the lease's time to live, ms; "0" gives it back (if it is the taker's)
--
-- Returns 1 when the lease is the taker's, 0 when another process holds it, -1 when the
-- job is gone or no longer running.

if ARGV[2] == '0' then
  if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
  return 1
end
local st = redis.call('HGET', KEYS[2], 'status')
if st ~= 'running' then return -1 end
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
