-- link_replay.lua: records on a run that another run replays it.
--
-- KEYS[1] -> the original run's hash
--
-- ARGV[1] -> the replay's run id
--
-- Returns 1, or 0 when the original is gone (it expired: nothing to link).

if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local old = redis.call('HGET', KEYS[1], 'replayed_as')
if not old or old == '' then
  redis.call('HSET', KEYS[1], 'replayed_as', ARGV[1])
  return 1
end
for id in string.gmatch(old, '%S+') do
  if id == ARGV[1] then return 1 end
end
redis.call('HSET', KEYS[1], 'replayed_as', old .. ' ' .. ARGV[1])
return 1
