package engine

import "sync"

// cancelledRuns remembers runs this process saw cancelled — cancelled here, or found
// cancelled by a gate or the cancel watch — so that the gate drops a queued pure step of
// such a run without reading Redis (a pure step whose state this process has reads
// nothing else). A cancelled run stays cancelled (retrying its dead letters does not
// reopen it), so an entry never goes stale. Beyond maxCancelledRuns the oldest are
// forgotten; a pure step of a forgotten run then runs, and its commit is refused.
type cancelledRuns struct {
	mu   sync.Mutex
	set  map[runKey]struct{}
	ring []runKey // insertion order, for forgetting the oldest
	next int
}

type runKey struct{ flow, run string }

const maxCancelledRuns = 4096

func newCancelledRuns() *cancelledRuns {
	return &cancelledRuns{set: map[runKey]struct{}{}}
}

func (c *cancelledRuns) add(flow, run string) {
	k := runKey{flow, run}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.set[k]; ok {
		return
	}
	if len(c.ring) < maxCancelledRuns {
		c.ring = append(c.ring, k)
	} else {
		delete(c.set, c.ring[c.next])
		c.ring[c.next] = k
		c.next = (c.next + 1) % maxCancelledRuns
	}
	c.set[k] = struct{}{}
}

func (c *cancelledRuns) has(flow, run string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.set[runKey{flow, run}]
	return ok
}
