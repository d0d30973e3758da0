package engine

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// committer sends step commits to Redis in batches: whatever is waiting when a pipeline
// returns goes in the next one, so under load many commits share a round trip and with
// no load a commit waits for nothing.
type committer struct {
	rdb *store.Redis
	log *slog.Logger
	ch  chan *commitReq
}

type commitReq struct {
	c    *store.Commit
	done chan commitResp
	// then, when set, is called on the committer's goroutine with the result instead
	// of sending it on done: it must not block.
	then func(commitResp)
	// ctx, when set, ends the request if it ends before the commit is sent: the
	// commit is then not sent at all (a start's: its caller was told it failed, and a
	// run it then started anyway would be a second run when the caller tries again).
	ctx context.Context
}

type commitResp struct {
	res store.CommitResult
	err error
	dur time.Duration
}

const maxCommitBatch = 128

func newCommitter(rdb *store.Redis, log *slog.Logger) *committer {
	return &committer{rdb: rdb, log: log, ch: make(chan *commitReq, 4*maxCommitBatch)}
}

// commit queues c and waits for its result.
func (c *committer) commit(ctx context.Context, cm *store.Commit) (store.CommitResult, time.Duration, error) {
	return c.send(ctx, &commitReq{c: cm, done: make(chan commitResp, 1)})
}

// commitOrDrop is commit for a commit that is not sent at all when ctx ends before it
// is (commitReq.ctx): a start's. When ctx ends after it was sent, the commit may have
// been made.
func (c *committer) commitOrDrop(ctx context.Context, cm *store.Commit) (store.CommitResult, time.Duration, error) {
	return c.send(ctx, &commitReq{c: cm, done: make(chan commitResp, 1), ctx: ctx})
}

func (c *committer) send(ctx context.Context, req *commitReq) (store.CommitResult, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return store.CommitResult{}, 0, err
	}
	select {
	case c.ch <- req:
	case <-ctx.Done():
		return store.CommitResult{}, 0, ctx.Err()
	}
	select {
	case r := <-req.done:
		return r.res, r.dur, r.err
	case <-ctx.Done():
		return store.CommitResult{}, 0, ctx.Err()
	}
}

// submit queues c; then gets its result on the committer's goroutine. It reports false,
// without queueing, when ctx ends first.
func (c *committer) submit(ctx context.Context, cm *store.Commit, then func(commitResp)) bool {
	select {
	case c.ch <- &commitReq{c: cm, then: then}:
		return true
	case <-ctx.Done():
		return false
	}
}

// run sends batches until ctx ends. Several workers of one engine share it.
func (c *committer) run(ctx context.Context) {
	batch := make([]*commitReq, 0, maxCommitBatch)
	commits := make([]*store.Commit, 0, maxCommitBatch)
	for {
		batch, commits = batch[:0], commits[:0]
		select {
		case <-ctx.Done():
			return
		case r := <-c.ch:
			batch = append(batch, r)
		}
		// Let the steps that woke this loop (or that its last replies let go on) queue
		// their commits too: under load the batches grow, and with nothing else to run
		// this returns at once.
		runtime.Gosched()
	fill:
		for len(batch) < maxCommitBatch {
			select {
			case r := <-c.ch:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		live := batch[:0]
		for _, r := range batch {
			if r.ctx != nil && r.ctx.Err() != nil {
				r.done <- commitResp{err: r.ctx.Err()}
				continue
			}
			live = append(live, r)
			commits = append(commits, r.c)
		}
		batch = live
		if len(batch) == 0 {
			continue
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		results, errs := c.rdb.CommitBatch(cctx, commits)
		cancel()
		d := time.Since(start)
		for i, r := range batch {
			resp := commitResp{res: results[i], err: errs[i], dur: d}
			if r.then != nil {
				r.then(resp)
			} else {
				r.done <- resp
			}
		}
	}
}

// commit sends a step's commit, retrying while Redis is unreachable, for at most
// claim_after: after that another worker may own the entry anyway.
func (w *Worker) commit(plan *flows.Plan, c *store.Commit, b *built, fused []fusedStep, received time.Time) stepOutcome {
	a := c.Act
	deadline := time.Now().Add(plan.Settings.ClaimAfter.D())
	wait := 20 * time.Millisecond
	for {
		res, cdur, err := w.e.commits.commit(w.hard, c)
		if err == nil {
			return w.committed(a, b, c.Transitions, fused, res, cdur, received)
		}
		w.e.log.Debug("commit failed; retrying", "flow", a.Flow, "run", a.Run, "node", a.Node, "error", err)
		if w.hard.Err() != nil || time.Now().After(deadline) {
			w.e.log.Warn("commit failed; the step stays pending", "flow", a.Flow, "run", a.Run, "node", a.Node, "error", err)
			return outcomeLeft
		}
		select {
		case <-w.hard.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// committed handles a commit's reply.
func (w *Worker) committed(a store.Activation, b *built, trans []store.Transition, fused []fusedStep, res store.CommitResult, cdur time.Duration, received time.Time) stepOutcome {
	switch res.Status {
	case store.CommitOK:
		w.e.cache.putJSON(a.Flow, a.Run, res.Ckpt, b.newState, b.newJSON)
		for _, t := range trans {
			if p, ok := t.(store.Park); ok && p.Deadline > 0 {
				w.parked(a.Flow, p.Deadline)
			}
		}
		if o := w.e.opts.Observer; o != nil {
			total := time.Since(received)
			o.StepDone(a.Flow, a.Node, StepTiming{Component: b.comp, Run: b.dur, Commit: cdur, Total: total}, b.usage)
			for _, fs := range fused {
				o.StepDone(a.Flow, fs.node, StepTiming{Component: fs.component, Run: fs.dur, Commit: cdur, Total: total}, fs.usage)
			}
		}
		return outcomeCommitted
	case store.CommitMaxSteps:
		w.e.log.Info("run failed: deeper than max_steps", "flow", a.Flow, "run", a.Run, "node", a.Node, "depth", res.Step)
		return outcomeCommitted
	default:
		w.e.log.Debug("step result dropped", "flow", a.Flow, "run", a.Run, "node", a.Node, "entry", a.ID, "why", res.Status, "run_status", res.RunStatus)
		return outcomeStale
	}
}

// drop acknowledges an activation whose run was cancelled or is gone, without running
// it; interrupted, when set, records in the run's history the step the cancel stopped.
func (w *Worker) drop(a store.Activation, plan *flows.Plan, interrupted *store.Checkpoint) stepOutcome {
	ttl := flows.DefaultSettings.CheckpointTTL.D()
	if plan != nil {
		ttl = plan.Settings.CheckpointTTL.D()
	}
	ctx, cancel := context.WithTimeout(w.hard, 10*time.Second)
	defer cancel()
	st, err := w.e.rdb.Drop(ctx, a, w.consumer, interrupted, ttl)
	switch {
	case err != nil:
		w.e.log.Warn("cannot drop the step of a cancelled or lost run; it stays pending", "flow", a.Flow, "run", a.Run, "node", a.Node, "error", err)
		return outcomeLeft
	case st == store.DropRunning:
		// The run is not cancelled after all (a retried dead letter reopened it): the
		// step stays pending and is taken again after claim_after.
		return outcomeLeft
	}
	if interrupted != nil {
		w.e.log.Info("step interrupted: its run was cancelled", "flow", a.Flow, "run", a.Run, "node", a.Node)
	}
	return outcomeStale
}

// fail records a failed step: retried later, or moved to the dead letters.
func (w *Worker) fail(a store.Activation, plan *flows.Plan, node *flows.PlanNode, stepErr error, dur time.Duration) stepOutcome {
	settings := w.settingsOf(a.Flow)
	maxAttempts := settings.MaxAttempts
	if plan != nil {
		settings = plan.Settings
		maxAttempts = settings.MaxAttempts
	}
	if node != nil {
		maxAttempts = node.Retry.MaxAttempts
	}
	msg := stepErr.Error()
	ctx, cancel := context.WithTimeout(w.hard, 10*time.Second)
	defer cancel()
	status, deliveries, err := w.e.rdb.Fail(ctx, store.Failure{Act: a, Consumer: w.consumer, Error: truncate(msg, 4000),
		Permanent: isPermanent(stepErr), MaxAttempts: maxAttempts, TTL: settings.CheckpointTTL.D(),
		Attempt: store.Checkpoint{Duration: dur, Worker: w.consumer}})
	if err != nil {
		w.e.log.Warn("cannot record a failed step; it stays pending", "flow", a.Flow, "run", a.Run, "node", a.Node, "error", err, "step_error", firstLine(msg))
		return outcomeLeft
	}
	if o := w.e.opts.Observer; o != nil && (status == store.FailRetry || status == store.FailDead) {
		o.StepFailed(a.Flow, a.Node, status == store.FailDead)
	}
	switch status {
	case store.FailRetry:
		w.e.log.Info("step failed; will retry", "flow", a.Flow, "run", a.Run, "node", a.Node, "attempt", deliveries, "error", firstLine(msg))
		return outcomeRetry
	case store.FailDead:
		w.e.log.Warn("step moved to the dead letters", "flow", a.Flow, "run", a.Run, "node", a.Node, "attempts", deliveries, "error", firstLine(msg))
		return outcomeDead
	}
	return outcomeStale
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
