package store

import "testing"

// XINFO CONSUMERS answers as Redis 7.0 (name, pending, idle: the time since the consumer
// last got an entry) and 7.2+ (also inactive) send them, in RESP2 (pairs in a list) and
// RESP3 (maps).
func TestAnyLiveCountsAConsumerWithNoLivenessRecordByWhenRedisLastSawIt(t *testing.T) {
	const minute = int64(60_000)
	resp2 := func(name string, fields ...any) any {
		return []any{append([]any{"name", name}, fields...)}
	}
	resp3 := func(name string, fields map[any]any) any {
		fields["name"] = name
		return []any{fields}
	}
	none := map[string]bool{}
	for _, c := range []struct {
		name         string
		res          any
		alive, known map[string]bool
		want         bool
	}{
		// Bug 6 (issue 27): on Redis 7.0 a worker that stopped cleanly leaves its consumer in
		// the group; once the sweepers forgot its record it was counted live for as long as
		// the consumer stayed (an hour), and the run never said no worker serves it.
		{"7.0: a consumer no worker vouches for, that got nothing for two minutes, is gone", resp2("w-1", "pending", int64(0), "idle", 2*minute), none, none, false},
		{"7.0, RESP3: the same", resp3("w-1", map[any]any{"pending": int64(0), "idle": 2 * minute}), none, none, false},
		{"7.0: one that got an entry a moment ago is live", resp2("w-1", "pending", int64(1), "idle", int64(800)), none, none, true},
		{"7.2: one that tried to read a moment ago is live, though it got nothing for long", resp2("w-1", "pending", int64(0), "idle", int64(300), "inactive", 10*minute), none, none, true},
		{"7.2: one that has not tried to read for two minutes is gone", resp2("w-1", "pending", int64(0), "idle", 2*minute, "inactive", 2*minute), none, none, false},
		{"a worker that says it is alive is live, however long Redis has not seen it", resp2("w-1", "pending", int64(0), "idle", 10*minute), map[string]bool{"w-1": true}, map[string]bool{"w-1": true}, true},
		{"a worker whose record went silent is gone, though Redis saw it a moment ago", resp2("w-1", "pending", int64(0), "idle", int64(10)), none, map[string]bool{"w-1": true}, false},
		{"a server that reports no idle time: counted live, nothing is said on a guess", resp2("w-1", "pending", int64(0)), none, none, true},
		{"no consumer at all", []any{}, none, none, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := anyLive(c.res, c.alive, c.known); got != c.want {
				t.Errorf("anyLive = %v, want %v", got, c.want)
			}
		})
	}
}
