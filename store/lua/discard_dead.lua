-- discard_dead.lua: deletes a dead letter. Its run stays failed; a run that has
-- expired is not brought back as a stray hash.
--
-- KEYS[1] -> dead-letter stream
-- KEYS[2] -> run hash of the dead letter's run
--
-- ARGV[1] -> dead-letter id
--
-- Returns 1 when the dead letter was deleted, 0 when it was not there.

if redis.call('XDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('HINCRBY', KEYS[2], 'dead', -1) end
return 1
