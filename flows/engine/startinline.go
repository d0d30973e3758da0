package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// startInline runs a fresh run's first step, and the pure steps that fuse after it,
// in this process, and commits them with the run's start in one script call
// (store/startfold.go): the run is created with those steps done, and no activation of
// its first node is written, read, fenced or acknowledged. A pure step has no side
// effects, so running it here rather than on a worker changes nothing but where it
// ran; the commit makes the start and the steps atomic: if it is not sent, neither is.
//
// It runs only where a worker of this process would run the step inline anyway: a
// fresh run id, one first node that is pure (so not a join), finishing in bounded time
// with the steps that fuse after it (inline.go), served by a running worker of this
// engine, and fusion on. Otherwise, or when the step fails (it
// then fails on a worker, with its retries), it writes nothing and reports false, and
// the run starts as usual. With true, err is the commit's error: when ctx ended before
// the commit was sent, no run was made; after, as for a start whose reply was lost,
// the run may exist.
func (e *Engine) startInline(ctx context.Context, plan *flows.Plan, args store.StartArgs, state map[string]any, stateJSON []byte) (bool, error) {
	if e.opts.NoFuse || !args.Fresh || args.Ckpt == "" || len(args.Entries) != 1 || !e.rdb.Batches(args) || plan.Settings.MaxSteps < 1 {
		return false, nil
	}
	node := plan.Nodes[args.Entries[0]]
	if !e.chains.bounded(plan, node) { // pure (so not a join) and bounded, as the steps after it
		return false, nil
	}
	w := e.inlineWorker(plan.Flow, node.ID)
	if w == nil {
		return false, nil
	}
	a := store.Activation{Flow: plan.Flow, Part: args.Part, Node: node.ID, Run: args.Run, Version: plan.Version,
		Ckpt: args.Ckpt, Depth: 1, Deliveries: 1, Trace: args.Trace}
	j := e.newJob(a, plan, node, state)
	j.stateJSON, j.stateChecked, j.boundedOnly = stateJSON, true, true
	if node.Input != nil {
		in, err := node.Input.First(w.hard, state, state)
		if err != nil {
			return false, nil // it fails on a worker, as usual
		}
		j.step.Input = in
	}
	received := time.Now()
	w.beginStep(j, received, true)
	b, err := w.execute(j)
	if err != nil {
		endStep(j, outcomeLeft, nil, flows.Usage{})
		return false, nil
	}
	c := w.newCommit(j, b)
	c.Start = &args
	fused := w.fuse(j, c, b)
	if j.emitted.Load() {
		e.events.barrier() // its tokens go ahead of its commit's event
	}
	done := traceCommit(j, len(c.Steps))
	// The commit waits at most as long as a start would, and no longer than the worker
	// whose committer loops send it run; if that ends before it is sent, it is not sent
	// at all (commitOrDrop): the caller is told the start failed, and no run is made.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	defer context.AfterFunc(w.hard, cancel)()
	res, cdur, err := e.startCommits.commitOrDrop(cctx, c)
	if err != nil {
		done(outcomeLeft)
		endStep(j, outcomeLeft, nil, b.usage)
		return true, fmt.Errorf("start run: %w", err)
	}
	e.checkStored(plan)
	out := w.committed(a, b, c.Transitions, fused, res, cdur, received)
	done(out)
	endStep(j, out, nil, b.usage)
	return true, nil
}

// startPipelines is how many batches of starting commits (startInline) may be in
// flight at once, each worker running that many loops of the engine's startCommits.
// A caller of Start waits for its run's commit, where it waited only for a start's
// MULTI before. One batch at a time made the fewest Redis instructions a run (fused 3
// nodes 268k) but 16 callers starting runs back to back (sluice bench) started 10-25 %
// fewer runs a second than without running the steps; four made 287k, smaller batches
// costing more per commit; two make 276k and start as many runs a second as before.
const startPipelines = 2

// inlineWorker returns a running worker of this engine that serves node of flow, or
// nil. (A pure node has no concurrency of its own: a worker bounds its pure steps.)
func (e *Engine) inlineWorker(flow, node string) *Worker {
	e.mu.Lock()
	defer e.mu.Unlock()
	for w := range e.workers {
		if w.ctx == nil || w.ctx.Err() != nil || !w.servesNode(node) {
			continue
		}
		w.cat.mu.Lock()
		s := w.cat.served[flow]
		ok := s != nil
		w.cat.mu.Unlock()
		if ok {
			return w
		}
	}
	return nil
}
