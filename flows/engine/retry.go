package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// withRetries runs an activation's step and, while it fails and its node's retry policy
// allows, runs it again after the policy's backoff. The entry stays in flight meanwhile,
// so its heartbeat keeps other workers from claiming it; if this process stops, another
// worker's sweeper takes it after claim_after. A run cancelled during the backoff is not
// retried: its entry is dropped.
func (w *Worker) withRetries(a store.Activation, pre preloaded, received time.Time) stepOutcome {
	out, policy := w.process(a, pre, received)
	return w.retrying(a, out, policy)
}

// retrying runs a step again, after its policy's backoff, while its last attempt came
// back outcomeRetry (see withRetries).
func (w *Worker) retrying(a store.Activation, out stepOutcome, policy flows.Retry) stepOutcome {
	for out == outcomeRetry {
		d := backoff(policy, a.Deliveries, rand.Float64())
		select {
		case <-w.hard.Done():
			return outcomeLeft
		case <-time.After(d):
		}
		ctx, cancel := context.WithTimeout(w.hard, 5*time.Second)
		next, ok, err := w.e.rdb.Reclaim(ctx, a, w.consumer)
		cancel()
		if err != nil {
			return outcomeLeft
		}
		if !ok {
			return outcomeStale
		}
		w.inflight.update(next)
		a = next
		out, policy = w.process(a, preloaded{}, time.Now())
	}
	return out
}

// backoff is the wait before the attempt after delivery n (1 for the first): initial,
// times multiplier for each attempt since, at most max, with ±20% jitter (r in [0, 1)).
func backoff(p flows.Retry, n int, r float64) time.Duration {
	d := float64(p.Initial.D()) * math.Pow(p.Multiplier, float64(max(n-1, 0)))
	d = min(d, float64(p.Max.D()))
	d *= 0.8 + 0.4*r
	return time.Duration(d)
}

// process runs one activation to a commit, a recorded failure, or leaves it pending. It
// returns the node's retry policy for the caller's backoff.
func (w *Worker) process(a store.Activation, pre preloaded, received time.Time) (stepOutcome, flows.Retry) {
	v := w.gate(a, pre)
	if v.kind != verdictRun {
		return w.apply(a, v), flows.DefaultRetry
	}
	j := v.job
	w.beginStep(j, received, false)
	out, usage, err := w.runJob(j, received)
	endStep(j, out, err, usage)
	return out, j.node.Retry
}

// failed records a job whose component failed: left pending when the worker stops,
// dropped when its run was cancelled meanwhile, else a failed attempt.
func (w *Worker) failed(j *job, err error, started time.Time) stepOutcome {
	a := j.a
	if w.hard.Err() != nil {
		return outcomeLeft
	}
	if w.inflight.wasCancelled(a) {
		// The run was cancelled while the step ran: record it and let go.
		return w.drop(a, j.plan, &store.Checkpoint{Node: a.Node, Attempt: a.Attempt(), Duration: time.Since(started), Worker: w.consumer})
	}
	return w.fail(a, j.plan, j.node, err, time.Since(started))
}

// runJob runs a job that passed the gate: its component, then its commit or failure.
func (w *Worker) runJob(j *job, received time.Time) (stepOutcome, flows.Usage, error) {
	started := time.Now()
	b, err := w.execute(j)
	if err != nil {
		return w.failed(j, err, started), flows.Usage{}, err
	}
	c := w.newCommit(j, b)
	var fused []fusedStep
	if !w.e.opts.NoFuse {
		fused = w.fuse(j, c, b)
	}
	if j.emitted.Load() {
		w.e.events.barrier() // its tokens go ahead of its commit's event
	}
	done := traceCommit(j, len(c.Steps))
	out := w.commit(j.plan, c, b, fused, received)
	done(out)
	return out, b.usage, nil
}
