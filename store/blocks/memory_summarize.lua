-- memory_summarize.lua: replaces the oldest messages of a session by a summary, unless
-- another step summarised as far already (two runs of one session may both try).
--
-- KEYS[1] -> the session's messages (HistoryKeys.Messages), a list of "SEQ\tJSON"
-- KEYS[2] -> the session's meta hash (HistoryKeys.Meta): seq, summary, through
--
-- ARGV[1] -> the seq of the last message the summary covers
-- ARGV[2] -> the summary
-- ARGV[3] -> time to live of both keys, ms (0: none)
--
-- Returns 1 when the summary was stored, 0 when a summary as recent was there.

local through = tonumber(ARGV[1])
local had = tonumber(redis.call('HGET', KEYS[2], 'through') or '0')
if had >= through then
  return 0
end
while true do
  local head = redis.call('LINDEX', KEYS[1], 0)
  if not head then break end
  local tab = string.find(head, '\t', 1, true)
  local seq = tonumber(string.sub(head, 1, tab - 1))
  if seq > through then break end
  redis.call('LPOP', KEYS[1])
end
redis.call('HSET', KEYS[2], 'summary', ARGV[2], 'through', through)
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return 1
