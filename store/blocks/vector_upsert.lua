-- vector_upsert.lua: adds or replaces chunks of a vector collection under a new version.
--
-- KEYS[1] -> the collection's chunks (VectorKeys.Docs), hash id -> JSON {text, metadata}
-- KEYS[2] -> their embeddings (VectorKeys.Vectors), hash id -> little-endian float32s
-- KEYS[3] -> every id by the version that last changed it (VectorKeys.Changes)
-- KEYS[4] -> the collection's meta hash (VectorKeys.Meta): version, epoch, dims, model,
--            floor, deleted
--
-- ARGV[1] -> the embeddings' dimensions
-- ARGV[2] -> the embedding model
-- ARGV[3] -> an epoch for a new collection (kept when the collection exists)
-- ARGV[4..] -> id, chunk JSON, embedding, for each chunk
--
-- Returns the new version, or an error when the collection holds embeddings of other
-- dimensions or of another model.

local meta = redis.call('HMGET', KEYS[4], 'dims', 'model')
if meta[1] and meta[1] ~= ARGV[1] then
  return redis.error_reply('DIMS the collection holds embeddings of ' .. meta[1] .. ' dimensions, not ' .. ARGV[1])
end
if meta[2] and meta[2] ~= ARGV[2] then
  return redis.error_reply('MODEL the collection holds embeddings of model ' .. meta[2] .. ', not ' .. ARGV[2])
end
redis.call('HSETNX', KEYS[4], 'epoch', ARGV[3])
redis.call('HSET', KEYS[4], 'dims', ARGV[1], 'model', ARGV[2])
local version = redis.call('HINCRBY', KEYS[4], 'version', 1)
local revived = 0
for i = 4, #ARGV, 3 do
  local id = ARGV[i]
  if redis.call('HSET', KEYS[1], id, ARGV[i + 1]) == 1 and redis.call('ZSCORE', KEYS[3], id) then
    revived = revived + 1
  end
  redis.call('HSET', KEYS[2], id, ARGV[i + 2])
  redis.call('ZADD', KEYS[3], version, id)
end
if revived > 0 then
  redis.call('HINCRBY', KEYS[4], 'deleted', -revived)
end
return version
