package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// The sweeper looks after what no live worker will: steps whose worker died or hangs,
// approvals whose timeout passed, runs whose retention ended, consumers of stopped
// processes. It is built so that an idle flow costs almost nothing:
//
//   - Steps of dead workers: every worker records that it is alive (heartbeat.go); the
//     sweeper claims pending entries (XAUTOCLAIM, min-idle claim_after) over every
//     served stream only when some worker stopped recording, when this worker left a
//     step pending itself (Redis was unreachable for its commit, or a read failed: its
//     reply may be lost) — sweep after sweep until no entry pending for this worker is
//     one it does not run — and otherwise every fullSweepEvery as a safety net.
//   - Approvals and retention: one probe per flow every opts.Prune reads the earliest
//     approval deadline and the earliest expiry; the sweeper acts when one is due, and
//     a worker that parks a run with a deadline tells its sweeper at once.

// fullSweepEvery is how often a worker claims over all its streams even though no
// worker seems to have died (one that died before it ever recorded itself, say).
const fullSweepEvery = 5 * time.Minute

// consumerIdle is how long a consumer may go without reading before a worker deletes it
// from its groups (when it has nothing pending): its process is gone.
const consumerIdle = time.Hour

// janitor is a flow's sweeper schedule in one worker.
type janitor struct {
	nextProbe      time.Time
	waitDue        int64 // unix ms of the earliest approval deadline known; 0 none
	expiryDue      int64 // unix ms of the earliest run expiry known; 0 none
	prunedConsumer time.Time
}

func (w *Worker) sweepLoop(ctx context.Context) {
	var lastFull time.Time      // zero: the first sweep claims over everything
	var orphans map[orphan]bool // what the last look for left entries found
	for {
		every := min(max(w.claimAfter()/4, 50*time.Millisecond), 5*time.Second)
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		now := time.Now()
		shortest, longest := w.claimAfterRange()
		dead, err := w.e.rdb.DeadWorkers(ctx, now.Add(-shortest), w.consumer)
		if err != nil && ctx.Err() == nil {
			w.e.log.Warn("sweeper: cannot read which workers are alive", "error", err)
		}
		left := w.leftPending.get()
		ownLeft := !left.IsZero() && now.Sub(left) > longest
		if len(dead) > 0 || ownLeft || now.Sub(lastFull) > fullSweepEvery {
			if w.claimAll(ctx) {
				lastFull = now
				if ownLeft {
					// The sweep claimed what had been idle for claim_after, which a left
					// entry may not have been: a heartbeat sent while its step ran can
					// reach Redis after the step was left (it waited in the client's
					// retries while Redis was away), and so can a claim whose reply was
					// lost. The worker is alive, so nothing else would claim the entry
					// before the next full sweep: the mark stays, and the sweeps go on,
					// until no entry pending for this worker is one it does not run.
					var again bool
					orphans, again = w.leftEntries(ctx, orphans)
					if !again {
						orphans = nil
						w.leftPending.clear(left)
					}
				}
				// A worker silent for three times the longest claim_after has no entry
				// left that this complete sweep did not claim: forget it.
				if gone, err := w.e.rdb.DeadWorkers(ctx, now.Add(-3*longest), w.consumer); err == nil && len(gone) > 0 {
					_ = w.e.rdb.ForgetWorkers(ctx, gone)
				}
			}
		}
		for _, id := range w.flowsServed() {
			w.tend(ctx, id)
		}
	}
}

// claimAll claims the entries of every served stream that have been pending longer
// than their flow's claim_after, as many as each node has room for, and runs them. It
// reports whether it got through everything (no node was out of room).
func (w *Worker) claimAll(ctx context.Context) bool {
	streams, err := w.servedStreams(ctx)
	if err != nil {
		return false
	}
	complete := true
	for _, st := range streams {
		ok, err := w.claimNode(ctx, st.ref, st.limit, st.settings)
		if err != nil {
			return false
		}
		complete = complete && ok
	}
	return complete
}

// servedStream is a node stream this worker reads, with its node's limit and its
// flow's settings.
type servedStream struct {
	ref      store.NodeRef
	limit    int
	settings flows.Settings
}

// servedStreams lists the node streams this worker serves: every node of its pool, of
// every flow it serves, on every partition of the flow.
func (w *Worker) servedStreams(ctx context.Context) ([]servedStream, error) {
	var out []servedStream
	for _, id := range w.flowsServed() {
		w.cat.mu.Lock()
		s := w.cat.served[id]
		if s == nil {
			w.cat.mu.Unlock()
			continue
		}
		nodes := append([]string(nil), s.nodes...)
		settings := s.settings
		limits := s.limits
		w.cat.mu.Unlock()
		parts, err := w.e.rdb.Parts(ctx, id)
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			if !w.servesNode(n) {
				continue // another pool's
			}
			limit := flows.DefaultConcurrency
			if l, ok := limits[n]; ok && l > 0 {
				limit = l
			}
			for _, p := range parts {
				out = append(out, servedStream{store.NodeRef{Flow: id, Node: n, Part: p.Part}, limit, settings})
			}
		}
	}
	return out, nil
}

// orphan is an entry pending for this worker's consumer that it does not run.
type orphan struct {
	ref   store.NodeRef
	entry string
}

// leftEntries looks for entries pending for this worker's consumer on its served
// streams that it does not run, and reports whether the sweeps must go on: when it
// cannot tell, or when an entry it found is one the look before found too. An entry
// found only once may be one a reader has just read and not yet started; one found
// twice in a row is left, and the next sweep claims it once it has been idle for
// claim_after. It returns what it found, for the next look.
func (w *Worker) leftEntries(ctx context.Context, before map[orphan]bool) (map[orphan]bool, bool) {
	streams, err := w.servedStreams(ctx)
	if err != nil {
		return before, true
	}
	refs := make([]store.NodeRef, len(streams))
	for i, st := range streams {
		refs[i] = st.ref
	}
	pending, err := w.e.rdb.PendingOf(ctx, refs, w.consumer, maxLeftLook)
	if err != nil {
		return before, true
	}
	found := map[orphan]bool{}
	again := false
	for i, ids := range pending {
		for _, e := range ids {
			if w.inflight.has(refs[i], e) {
				continue
			}
			o := orphan{refs[i], e}
			found[o] = true
			again = again || before[o]
		}
	}
	if len(found) == 0 {
		return nil, false
	}
	if before == nil {
		again = true // nothing to compare with yet
	}
	return found, again
}

// maxLeftLook bounds how many of its pending entries per stream leftEntries reads.
const maxLeftLook = 1000

// claimNode claims the entries of one node stream pending longer than claim_after, as
// many as the node has room for, and runs them. It reports whether it got through them.
func (w *Worker) claimNode(ctx context.Context, ref store.NodeRef, limit int, settings flows.Settings) (bool, error) {
	id, n := ref.Flow, ref.Node
	free := limit - w.inflight.count(id, n)
	if free <= 0 {
		return false, nil
	}
	dials := w.e.rdb.Dials()
	acts, deleted, err := w.e.rdb.AutoClaim(ctx, ref, w.consumer, settings.ClaimAfter.D(), free)
	if err != nil || w.e.rdb.Dials() != dials {
		// Redis may have run the claim and lost its reply: what it took is pending for
		// this worker, which does not run it. Whether the client then failed or sent
		// the claim again on a new connection (store/dials.go), which found nothing
		// idle, the sweeper takes it back after claim_after, as for a read.
		w.left()
	}
	if err != nil {
		if ctx.Err() == nil {
			w.e.log.Warn("sweeper: claim failed", "flow", id, "node", n, "partition", ref.Part, "error", err)
		}
		return false, err
	}
	if len(deleted) > 0 {
		w.e.log.Warn("sweeper: pending entries had been deleted; their runs cannot continue", "flow", id, "node", n, "partition", ref.Part, "entries", deleted)
	}
	for _, a := range acts {
		w.e.log.Info("sweeper: took over a pending step", "flow", id, "run", a.Run, "node", n, "entry", a.ID, "delivery", a.Deliveries)
		maxAttempts := settings.MaxAttempts
		if node := w.planNode(a); node != nil {
			maxAttempts = node.Retry.MaxAttempts
		}
		if a.Deliveries > maxAttempts {
			w.deadAfterCrashes(a)
			continue
		}
		w.start(a, preloaded{})
	}
	return len(acts) < free, nil
}

// deadAfterCrashes moves an entry that was delivered more than max_attempts times
// without ever recording an error (its workers crashed or hung) to the dead letters.
func (w *Worker) deadAfterCrashes(a store.Activation) {
	last := ""
	if r, err := w.e.rdb.GetRun(w.hard, a.Flow, a.Run); err == nil && r.LastError != "" {
		last = "; last error: " + r.LastError
	}
	w.fail(a, nil, nil, flows.Permanent(fmt.Errorf("the step did not finish after %d deliveries (its workers stopped or timed out)%s", a.Deliveries-1, last)), 0)
}

// tend does a flow's janitorial work that is due: approvals whose timeout passed, runs
// whose retention ended, consumers of stopped processes.
func (w *Worker) tend(ctx context.Context, id string) {
	w.cat.mu.Lock()
	s := w.cat.served[id]
	if s == nil {
		w.cat.mu.Unlock()
		return
	}
	j := s.janitor
	nodes := append([]string(nil), s.nodes...)
	w.cat.mu.Unlock()
	now := time.Now()
	nowMS := now.UnixMilli()
	if !now.Before(j.nextProbe) {
		p, err := w.e.rdb.ProbeFlow(ctx, id)
		if err != nil {
			return
		}
		j.waitDue, j.expiryDue, j.nextProbe = p.WaitDue, p.ExpiryDue, now.Add(w.opts.Prune)
	}
	if j.waitDue > 0 && j.waitDue <= nowMS {
		w.e.decideExpired(ctx, id)
		j.waitDue, j.nextProbe = 0, now // look again at once: there may be more
	}
	if j.expiryDue > 0 && j.expiryDue <= nowMS {
		w.e.pruneRuns(ctx, id)
		j.expiryDue, j.nextProbe = 0, now
	}
	if now.Sub(j.prunedConsumer) > 10*time.Minute {
		j.prunedConsumer = now
		if n, err := w.e.rdb.PruneConsumers(ctx, id, nodes, consumerIdle); err == nil && n > 0 {
			w.e.log.Info("deleted consumers of stopped workers", "flow", id, "consumers", n)
		}
	}
	w.cat.mu.Lock()
	if s := w.cat.served[id]; s != nil {
		// A deadline learned meanwhile (a park committed here) is kept.
		if s.janitor.waitDue > 0 && (j.waitDue == 0 || s.janitor.waitDue < j.waitDue) {
			j.waitDue = s.janitor.waitDue
		}
		s.janitor = j
	}
	w.cat.mu.Unlock()
}

// parked tells the sweeper that a run of flow waits for an approval until deadline.
func (w *Worker) parked(flow string, deadline int64) {
	w.cat.mu.Lock()
	defer w.cat.mu.Unlock()
	if s := w.cat.served[flow]; s != nil && (s.janitor.waitDue == 0 || deadline < s.janitor.waitDue) {
		s.janitor.waitDue = deadline
	}
}
