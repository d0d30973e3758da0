-- promote.lua: points one environment of a flow at a version and records the promotion,
-- reading the version the environment pointed at in the same step: two promotions at
-- the same instant are recorded one after the other, each with the version it replaced.
--
-- KEYS[1] -> the flow's current version (the first environment's pointer)
-- KEYS[2] -> the flow's environments hash (the other environments' pointers)
-- KEYS[3] -> the flow's versions sorted set (the history)
-- KEYS[4] -> the flow's version notes hash
-- KEYS[5] -> the flow's promotions stream
--
-- ARGV[1] -> the environment's name
-- ARGV[2] -> "1" when it is the first environment (its pointer is KEYS[1]), else "0"
-- ARGV[3] -> the version
-- ARGV[4] -> now, unix ms
-- ARGV[5] -> promotions stream MAXLEN (approximate)
-- ARGV[6] -> the environment the version comes from ("" none)
-- ARGV[7] -> who promotes
-- ARGV[8] -> the promotion's message ("" none; in the first environment it is noted on
--            the version too, as a save's is)
-- ARGV[9] -> the gate's test result, JSON ("" none)
--
-- Returns {promotion stream id, the version the environment pointed at before ("" none)}.

local prev
if ARGV[2] == '1' then
  prev = redis.call('GET', KEYS[1])
  redis.call('SET', KEYS[1], ARGV[3])
  redis.call('ZADD', KEYS[3], 'NX', ARGV[4], ARGV[3])
  if ARGV[8] ~= '' then redis.call('HSET', KEYS[4], ARGV[3], ARGV[8]) end
else
  prev = redis.call('HGET', KEYS[2], ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
end
if not prev then prev = '' end
local id = redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[5], '*',
  'env', ARGV[1], 'version', ARGV[3], 'previous', prev, 'from', ARGV[6], 'by', ARGV[7],
  'message', ARGV[8], 'test', ARGV[9])
return {id, prev}
