-- bulk_done.lua: records what replaying one run of a bulk replay job gave — once: a run
-- already recorded keeps its first result (a second process that raced for it changes
-- nothing).
--
-- KEYS[1] -> the job's hash
-- KEYS[2] -> the job's results hash (run -> JSON)
--
-- ARGV[1] -> the original run id
-- ARGV[2] -> the result JSON
-- ARGV[3] -> its outcome: "done", "failed" or "skipped" (the counter bumped)
-- ARGV[4] -> now, unix ms
--
-- Returns 1 when recorded, 0 when the run had a result already.

if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], ARGV[3], 1)
redis.call('HSET', KEYS[1], 'updated_at', ARGV[4])
return 1
