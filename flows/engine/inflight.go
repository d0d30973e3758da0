package engine

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/store"
)

// inflight is the registry of a worker's steps in flight — running, or waiting for a
// retry — by flow, node and entry: heartbeats keep their entries, cancelling a run
// cancels their contexts, and node limits count them.
type inflight struct {
	mu       sync.Mutex
	steps    map[stepKey]*running
	busy     map[nodeKey]int
	reserved map[nodeKey]int // room readers took for the reads they wait on
}

type nodeKey struct{ flow, node string }

type stepKey struct {
	flow, node string
	part       int
	entry      string // an entry id is unique within one partition's stream only
}

type running struct {
	a         store.Activation
	started   time.Time
	timeout   time.Duration // the node's: a step far past it is not kept alive
	io        bool          // not a pure step: the cancel watch looks at its run
	cancel    context.CancelCauseFunc
	cancelled bool // its run was cancelled while it ran
}

func newInflight() *inflight {
	return &inflight{steps: map[stepKey]*running{}, busy: map[nodeKey]int{}, reserved: map[nodeKey]int{}}
}

func keyOf(a store.Activation) stepKey { return stepKey{a.Flow, a.Node, a.Part, a.ID} }

// add registers a step; it returns false when the step is already in flight here (the
// sweeper claimed a step this worker is still running).
func (f *inflight) add(a store.Activation, timeout time.Duration, io bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := keyOf(a)
	if _, ok := f.steps[k]; ok {
		return false
	}
	f.steps[k] = &running{a: a, started: time.Now(), timeout: timeout, io: io}
	f.busy[nodeKey{a.Flow, a.Node}]++
	return true
}

func (f *inflight) remove(a store.Activation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := keyOf(a)
	if _, ok := f.steps[k]; !ok {
		return
	}
	delete(f.steps, k)
	nk := nodeKey{a.Flow, a.Node}
	if f.busy[nk]--; f.busy[nk] <= 0 {
		delete(f.busy, nk)
	}
}

// update replaces a step's activation (a retry's has a new delivery count) and restarts
// its clock.
func (f *inflight) update(a store.Activation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.steps[keyOf(a)]; ok {
		r.a, r.started, r.cancelled = a, time.Now(), false
	}
}

// has reports whether an entry of a node stream is in flight here.
func (f *inflight) has(n store.NodeRef, entry string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.steps[stepKey{n.Flow, n.Node, n.Part, entry}]
	return ok
}

func (f *inflight) count(flow, node string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.busy[nodeKey{flow, node}]
}

// reserve takes room for up to want steps of a node whose limit is limit, beside the
// steps in flight and the room other readers took; it returns how much it took.
func (f *inflight) reserve(flow, node string, limit, want int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := nodeKey{flow, node}
	n := min(want, limit-f.busy[k]-f.reserved[k])
	if n <= 0 {
		return 0
	}
	f.reserved[k] += n
	return n
}

// release gives back room reserve took (after the read's steps were added).
func (f *inflight) release(flow, node string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := nodeKey{flow, node}
	if f.reserved[k] -= n; f.reserved[k] <= 0 {
		delete(f.reserved, k)
	}
}

func (f *inflight) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.steps)
}

func (f *inflight) setCancel(a store.Activation, cancel context.CancelCauseFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.steps[keyOf(a)]; ok {
		r.cancel = cancel
		if cancel != nil && r.cancelled {
			cancel(errRunCancelled)
		}
	}
}

// cancelRun cancels the contexts of a run's steps in flight here and marks them, so that
// a step waiting for its retry is dropped instead. It returns how many it found.
func (f *inflight) cancelRun(flow, run string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, r := range f.steps {
		if k.flow == flow && r.a.Run == run {
			r.cancelled = true
			if r.cancel != nil {
				r.cancel(errRunCancelled)
			}
			n++
		}
	}
	return n
}

// wasCancelled reports whether a step's run was cancelled while it was in flight.
func (f *inflight) wasCancelled(a store.Activation) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.steps[keyOf(a)]
	return ok && r.cancelled
}

// snapshot returns the steps in flight.
func (f *inflight) snapshot() []running {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]running, 0, len(f.steps))
	for _, r := range f.steps {
		out = append(out, *r)
	}
	return out
}
