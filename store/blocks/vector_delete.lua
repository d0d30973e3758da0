-- vector_delete.lua: deletes chunks of a vector collection under a new version. A
-- deleted id stays in Changes (so that indexes in workers learn of it) until there are
-- more of them than live chunks: then they are pruned at once and the version below
-- which an index cannot catch up by Changes (floor) moves to this one.
--
-- KEYS[1] -> the collection's chunks (VectorKeys.Docs)
-- KEYS[2] -> their embeddings (VectorKeys.Vectors)
-- KEYS[3] -> every id by the version that last changed it (VectorKeys.Changes)
-- KEYS[4] -> the collection's meta hash (VectorKeys.Meta)
--
-- ARGV[1..] -> the ids to delete
--
-- Returns {version, how many were deleted}.

if redis.call('EXISTS', KEYS[4]) == 0 then
  return {0, 0}
end
local gone = {}
for i = 1, #ARGV do
  if redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then
    redis.call('HDEL', KEYS[2], ARGV[i])
    gone[#gone + 1] = ARGV[i]
  end
end
if #gone == 0 then
  return {tonumber(redis.call('HGET', KEYS[4], 'version') or '0'), 0}
end
local version = redis.call('HINCRBY', KEYS[4], 'version', 1)
for _, id in ipairs(gone) do
  redis.call('ZADD', KEYS[3], version, id)
end
local deleted = redis.call('HINCRBY', KEYS[4], 'deleted', #gone)
if deleted > math.max(1000, redis.call('HLEN', KEYS[1])) then
  local ids = redis.call('ZRANGE', KEYS[3], 0, -1)
  for _, id in ipairs(ids) do
    if redis.call('HEXISTS', KEYS[1], id) == 0 then
      redis.call('ZREM', KEYS[3], id)
    end
  end
  redis.call('HSET', KEYS[4], 'floor', version, 'deleted', 0)
end
return {version, #gone}
