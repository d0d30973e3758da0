-- reclaim.lua: a worker takes back an entry of its own for another attempt. The delivery
-- count goes up by one; an entry another consumer has claimed meanwhile is left alone.
--
-- KEYS[1] -> the node's stream
--
-- ARGV[1] -> consumer group
-- ARGV[2] -> consumer name
-- ARGV[3] -> entry id
--
-- Returns {deliveries, field, value, ...} or {} when the entry is no longer ours.

local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 0 or p[1][2] ~= ARGV[2] then return {} end
local e = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3])
if #e == 0 or not e[1] then return {} end
local out = {tonumber(p[1][4]) + 1}
for _, v in ipairs(e[1][2]) do out[#out + 1] = v end
return out
