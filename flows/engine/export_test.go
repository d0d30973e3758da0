package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/store"
)

// SetWatchTicks sets how long the run watcher's reads block and how often a waiter reads
// its run anyway: a test that sets both far beyond its own timeout knows that a wait
// that returns was woken by its run's event.
func SetWatchTicks(e *Engine, block, safety time.Duration) {
	e.watch.mu.Lock()
	defer e.watch.mu.Unlock()
	e.watch.block, e.watch.safety = block, safety
}

// WatchReads reports whether the run watcher's read in flight covers a partition of flow.
func WatchReads(e *Engine, flow string) bool {
	e.watch.mu.Lock()
	defer e.watch.mu.Unlock()
	for p := range e.watch.reading {
		if p.Flow == flow {
			return true
		}
	}
	return false
}

// Waiting reports whether someone waits for run.
func Waiting(e *Engine, flow, run string) bool {
	e.watch.mu.Lock()
	defer e.watch.mu.Unlock()
	for ref := range e.watch.waiters {
		if ref.Flow == flow && ref.Run == run {
			return true
		}
	}
	return false
}

// SetLoadHook makes w call hook with a flow id and the load's ticket (1 for the flow's
// first load) before a load of it applies what it read ("read") and after ("done").
// Set it before Run.
func SetLoadHook(w *Worker, hook func(flow, stage string, ticket uint64)) { w.loadHook = hook }

// ServedParts returns the partitions of flow w reads.
func ServedParts(w *Worker, flow string) []int {
	w.cat.mu.Lock()
	defer w.cat.mu.Unlock()
	if s := w.cat.served[flow]; s != nil {
		return slices.Clone(s.parts)
	}
	return nil
}

// SetBusyBlock sets how long w's readers wait, while a node is left out of their reads
// for lack of room, before they read again. Set it before Run: a test that sets it far
// beyond its own timeout knows that such a node read again was read because its room
// was freed, not because a timer ran out.
func SetBusyBlock(w *Worker, d time.Duration) { w.rs.busyBlock = d }

// SetMaxReadStreams sets the most streams one of w's readers reads: a test with a few
// nodes gets a reader per node. Set it before Run.
func SetMaxReadStreams(w *Worker, n int) { w.rs.maxStreams = n }

// RecordWatchReads makes the run watcher record the partitions each of its reads covers;
// reads returns them.
func RecordWatchReads(e *Engine) (reads func() [][]store.PartRef) {
	var mu sync.Mutex
	var got [][]store.PartRef
	e.watch.mu.Lock()
	read := e.watch.read
	e.watch.read = func(ctx context.Context, parts []store.PartRef, afters []string, count int64, block time.Duration) ([]store.Event, error) {
		mu.Lock()
		got = append(got, slices.Clone(parts))
		mu.Unlock()
		return read(ctx, parts, afters, count, block)
	}
	e.watch.mu.Unlock()
	return func() [][]store.PartRef {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}
