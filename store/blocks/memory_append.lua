-- memory_append.lua: appends messages to a session's history, numbering them.
--
-- KEYS[1] -> the session's messages (HistoryKeys.Messages), a list of "SEQ\tJSON"
-- KEYS[2] -> the session's meta hash (HistoryKeys.Meta): seq, summary, through
--
-- ARGV[1] -> time to live of both keys, ms (0: none)
-- ARGV[2] -> the most messages kept after the summary; older ones are dropped
-- ARGV[3..] -> the messages' JSON, oldest first
--
-- Returns the seq of the last message appended.

local seq = 0
for i = 3, #ARGV do
  seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
  redis.call('RPUSH', KEYS[1], seq .. '\t' .. ARGV[i])
end
local keep = tonumber(ARGV[2])
if keep > 0 then
  redis.call('LTRIM', KEYS[1], -keep, -1)
end
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return seq
