package engine

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/store"
)

// heartbeatLoop records that this worker is alive (the sweepers of other workers claim
// a dead one's steps) and keeps the idle time of its long-running steps low, so that no
// sweeper hands them to another worker while they still run here. A step running far
// past its node's timeout (a component that ignores its context) is no longer kept: it
// is left to the sweepers.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	for {
		claimAfter := w.claimAfter()
		every := min(max(claimAfter/3, 20*time.Millisecond), 10*time.Second)
		// After ctx ends, in-flight steps keep their heartbeat through the grace period.
		if ctx.Err() != nil && w.inflight.total() == 0 {
			return
		}
		stop := ctx.Done()
		if ctx.Err() != nil {
			// Stopping: keep beating until the steps end, and look often whether they have.
			stop = nil
			every = min(every, 50*time.Millisecond)
		}
		select {
		case <-w.hard.Done():
			return
		case <-stop:
			continue
		case <-time.After(every):
		}
		hctx, cancel := context.WithTimeout(w.hard, 5*time.Second)
		if ctx.Err() == nil {
			if err := w.e.rdb.WorkerAlive(hctx, w.consumer); err != nil && w.hard.Err() == nil {
				w.e.log.Debug("cannot record that the worker is alive", "error", err)
			}
		}
		due := map[store.NodeRef][]string{}
		for _, r := range w.inflight.snapshot() {
			age := time.Since(r.started)
			if age >= every && age < r.timeout+claimAfter {
				k := store.NodeRef{Flow: r.a.Flow, Node: r.a.Node, Part: r.a.Part}
				due[k] = append(due[k], r.a.ID)
			}
		}
		for k, ids := range due {
			if err := w.e.rdb.Heartbeat(hctx, k, w.consumer, ids); err != nil && w.hard.Err() == nil {
				w.e.log.Debug("heartbeat failed", "flow", k.Flow, "node", k.Node, "partition", k.Part, "error", err)
			}
		}
		cancel()
	}
}

// cancelEvery is how often a worker looks whether the runs of its longer steps were
// cancelled by another process (a cancel in this process reaches its steps at once).
const cancelEvery = time.Second

// cancelWatch cancels the contexts of steps whose run was cancelled elsewhere (the API
// of another process), so that an in-flight model or HTTP call stops within about a
// second. It only looks at steps with side effects that have run for a while: one
// pipelined status read per second for all of them, nothing when there are none.
func (w *Worker) cancelWatch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(cancelEvery):
		}
		seen := map[store.RunRef]bool{}
		var refs []store.RunRef
		for _, r := range w.inflight.snapshot() {
			if ref := r.a.Ref(); r.io && time.Since(r.started) >= cancelEvery/2 && !r.cancelled && !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
		if len(refs) == 0 {
			continue
		}
		statuses, err := w.e.rdb.RunStatuses(ctx, refs)
		if err != nil {
			continue
		}
		for i, st := range statuses {
			if st == store.StatusCancelled {
				w.e.cancelled.add(refs[i].Flow, refs[i].Run)
				if n := w.inflight.cancelRun(refs[i].Flow, refs[i].Run); n > 0 {
					w.e.log.Info("run cancelled elsewhere: stopping its steps here", "flow", refs[i].Flow, "run", refs[i].Run, "steps", n)
				}
			}
		}
	}
}
