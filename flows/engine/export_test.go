package engine

import "time"

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
