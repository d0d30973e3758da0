package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// WorkerOptions configure a worker.
type WorkerOptions struct {
	// Flows the worker serves. It reads the streams of every node any published version
	// of these flows has.
	Flows []string
	// Grace is how long in-flight steps may run after the worker is told to stop;
	// steps still running then are abandoned, left pending for another worker.
	Grace time.Duration
	// Block is how long one read waits for activations (default 1s).
	Block time.Duration
	// Refresh is how often the worker looks for new versions and nodes (default 2s).
	Refresh time.Duration
	// Prune is how often the worker removes expired runs from its flows' run index
	// (default 30s).
	Prune time.Duration
}

// Worker reads and runs activations of some flows until its context ends.
type Worker struct {
	e    *Engine
	opts WorkerOptions

	mu      sync.Mutex
	running bool
	ctx     context.Context // the Run context; nil before Run
	hard    context.Context // ends Grace after ctx
	served  map[string]bool
	wg      sync.WaitGroup
}

// NewWorker returns a worker for the given flows.
func (e *Engine) NewWorker(opts WorkerOptions) *Worker {
	if opts.Grace == 0 {
		opts.Grace = 10 * time.Second
	}
	if opts.Block == 0 {
		opts.Block = time.Second
	}
	if opts.Refresh == 0 {
		opts.Refresh = 2 * time.Second
	}
	if opts.Prune == 0 {
		opts.Prune = 30 * time.Second
	}
	return &Worker{e: e, opts: opts, served: map[string]bool{}}
}

// Add makes the worker serve another flow, also while it runs. Adding a flow it
// already serves does nothing.
func (w *Worker) Add(flow string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.served[flow] {
		return
	}
	w.served[flow] = true
	if !w.running {
		w.opts.Flows = append(w.opts.Flows, flow)
		return
	}
	if w.ctx.Err() == nil {
		w.serve(flow)
	}
}

// serve starts the goroutines of one flow; w.mu is held.
func (w *Worker) serve(flow string) {
	fw := &flowWorker{w: w, e: w.e, flow: flow, consumer: w.e.consumerName(), hard: w.hard,
		inflight: map[string]map[string]time.Time{}, wake: make(chan struct{}, 1), inlineSlots: make(chan struct{}, maxInlineBatches)}
	w.wg.Add(1)
	go func() { defer w.wg.Done(); fw.run(w.ctx) }()
}

// Run works until ctx ends, then stops reading, gives in-flight steps opts.Grace to
// finish and returns. Steps it abandons stay pending; the sweeper of any worker hands
// them on after claim_after.
func (w *Worker) Run(ctx context.Context) error {
	// hard ends opts.Grace after ctx: in-flight steps and their commits stop then.
	hard, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	go func() {
		select {
		case <-ctx.Done():
			select {
			case <-time.After(w.opts.Grace):
				cancelHard()
			case <-hard.Done():
			}
		case <-hard.Done():
		}
	}()

	var bg sync.WaitGroup
	bgCtx, stopBG := context.WithCancel(context.Background())
	bg.Add(2)
	go func() { defer bg.Done(); w.e.commits.run(bgCtx) }()
	go func() { defer bg.Done(); w.e.events.run(bgCtx) }()

	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		stopBG()
		return fmt.Errorf("worker is already running")
	}
	w.running, w.ctx, w.hard = true, ctx, hard
	for _, f := range w.opts.Flows {
		w.served[f] = true
		w.serve(f)
	}
	w.mu.Unlock()

	<-ctx.Done()
	w.wg.Wait()
	stopBG()
	bg.Wait()
	return nil
}

// flowWorker serves one flow: one blocking reader over all its node streams, the
// sweeper, heartbeats and the steps in flight.
type flowWorker struct {
	w        *Worker
	e        *Engine
	flow     string
	consumer string
	hard     context.Context

	mu       sync.Mutex
	nodes    []string
	limits   map[string]int
	settings flows.Settings
	inflight map[string]map[string]time.Time // node -> entry id -> started
	steps    sync.WaitGroup
	wake     chan struct{}
	// inlineSlots bounds the pipelines of inline steps in flight.
	inlineSlots chan struct{}
	lastPrune   time.Time // the sweeper's; when it last pruned the run index
}

func (f *flowWorker) run(ctx context.Context) {
	f.refresh(ctx)
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); f.sweepLoop(ctx) }()
	go func() { defer bg.Done(); f.heartbeatLoop(ctx) }()
	f.readLoop(ctx)
	bg.Wait()
	f.steps.Wait()
}

// refresh reloads the flow's node ids and the current plan's limits.
func (f *flowWorker) refresh(ctx context.Context) {
	nodes, err := f.e.rdb.FlowNodes(ctx, f.flow)
	if err != nil {
		if ctx.Err() == nil {
			f.e.log.Warn("worker: cannot read the flow's nodes", "flow", f.flow, "error", err)
		}
		return
	}
	sort.Strings(nodes)
	f.mu.Lock()
	if len(nodes) == 0 {
		// Redis lost the set (restarted empty): keep reading the nodes we know, so their
		// groups are created again.
		nodes = f.nodes
	}
	f.mu.Unlock()
	limits := map[string]int{}
	settings := flows.DefaultSettings
	if p, err := f.e.CurrentPlan(ctx, f.flow); err == nil {
		settings = p.Settings
		for id, n := range p.Nodes {
			limits[id] = n.Concurrency
		}
	}
	if err := f.e.rdb.EnsureGroups(ctx, f.flow, nodes); err != nil && ctx.Err() == nil {
		f.e.log.Warn("worker: cannot create consumer groups", "flow", f.flow, "error", err)
	}
	f.mu.Lock()
	f.nodes, f.limits, f.settings = nodes, limits, settings
	f.mu.Unlock()
}

func (f *flowWorker) limit(node string) int {
	if n, ok := f.limits[node]; ok && n > 0 {
		return n
	}
	return flows.DefaultConcurrency
}

// readable returns the nodes to read and how many entries to ask each for. COUNT
// applies to every stream of a read, so a node is read only when at least half of its
// capacity is free: reads stay large and no node goes over its limit.
func (f *flowWorker) readable() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var nodes []string
	count := 64
	for _, n := range f.nodes {
		limit := f.limit(n)
		free := limit - len(f.inflight[n])
		if free >= max(limit/2, 1) {
			nodes = append(nodes, n)
			count = min(count, free)
		}
	}
	return nodes, count
}

// consumerIdle is how long a consumer may go without reading before a worker deletes it
// from its groups (when it has nothing pending): its process is gone.
const consumerIdle = time.Hour

func (f *flowWorker) readLoop(ctx context.Context) {
	lastRefresh, lastPrune := time.Now(), time.Time{}
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		if time.Since(lastRefresh) > f.w.opts.Refresh {
			f.refresh(ctx)
			lastRefresh = time.Now()
		}
		if time.Since(lastPrune) > 10*time.Minute {
			lastPrune = time.Now()
			f.mu.Lock()
			nodes := append([]string(nil), f.nodes...)
			f.mu.Unlock()
			if n, err := f.e.rdb.PruneConsumers(ctx, f.flow, nodes, consumerIdle); err == nil && n > 0 {
				f.e.log.Info("deleted consumers of stopped workers", "flow", f.flow, "consumers", n)
			}
		}
		nodes, count := f.readable()
		if len(nodes) == 0 {
			// Every node is busy: wait for a step to finish.
			select {
			case <-ctx.Done():
			case <-f.wake:
			case <-time.After(f.w.opts.Block):
			}
			continue
		}
		acts, err := f.e.rdb.ReadGroup(ctx, f.flow, f.consumer, nodes, count, f.w.opts.Block)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.e.log.Warn("worker: read failed; backing off", "flow", f.flow, "error", err, "backoff", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		received := time.Now()
		var inline []store.Activation
		for _, a := range acts {
			if f.inlinable(a) {
				inline = append(inline, a)
			} else {
				f.start(a)
			}
		}
		if len(inline) > 0 {
			f.runInline(inline, received)
		}
	}
}

// start runs an activation in its own goroutine, counted against its node's limit.
func (f *flowWorker) start(a store.Activation) {
	f.mu.Lock()
	m := f.inflight[a.Node]
	if m == nil {
		m = map[string]time.Time{}
		f.inflight[a.Node] = m
	}
	if _, running := m[a.ID]; running {
		// The sweeper claimed a step this worker is still running (its heartbeats did
		// not get through); the running one will commit.
		f.mu.Unlock()
		return
	}
	m[a.ID] = time.Now()
	f.mu.Unlock()
	f.steps.Add(1)
	received := time.Now()
	go func() {
		defer f.steps.Done()
		out := f.process(a, received)
		if out == outcomeRetry {
			f.scheduleRetry(a)
		}
		f.mu.Lock()
		delete(f.inflight[a.Node], a.ID)
		f.mu.Unlock()
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}()
}

// scheduleRetry takes the entry back after a backoff and runs it again. If this
// process stops first, the sweeper of another worker takes it after claim_after.
func (f *flowWorker) scheduleRetry(a store.Activation) {
	f.mu.Lock()
	claimAfter := f.settings.ClaimAfter.D()
	f.mu.Unlock()
	d := retryBackoff(a.Deliveries, claimAfter)
	select {
	case <-f.hard.Done():
		return
	case <-time.After(d):
	}
	ctx, cancel := context.WithTimeout(f.hard, 5*time.Second)
	next, ok, err := f.e.rdb.Reclaim(ctx, a, f.consumer)
	cancel()
	if err != nil || !ok {
		return
	}
	f.mu.Lock()
	if f.inflight[a.Node] == nil {
		f.inflight[a.Node] = map[string]time.Time{}
	}
	f.inflight[a.Node][a.ID] = time.Now()
	f.mu.Unlock()
	if f.process(next, time.Now()) == outcomeRetry {
		f.scheduleRetry(next)
	}
}

// retryBackoff is 100ms doubled per attempt, capped at half of claim_after so that a
// local retry comes before the sweeper would.
func retryBackoff(deliveries int, claimAfter time.Duration) time.Duration {
	d := 100 * time.Millisecond << min(max(deliveries-1, 0), 10)
	if c := claimAfter / 2; d > c {
		d = c
	}
	return d
}

// process runs one activation to a commit, a recorded failure, or leaves it pending.
func (f *flowWorker) process(a store.Activation, received time.Time) stepOutcome {
	j, out, ok := f.prepare(a, nil)
	if !ok {
		return out
	}
	b, out, ok := f.execute(j)
	if !ok {
		return out
	}
	return f.commit(f.hard, j.plan, a, b, received)
}

// job is an activation ready to run.
type job struct {
	a     store.Activation
	plan  *flows.Plan
	node  *flows.PlanNode
	state map[string]any
	join  *joined
	step  *flows.Step
}

// prepare loads what a step needs: its plan, node and state (state, when not nil, was
// loaded already). ok is false when the activation was failed, dropped or left.
func (f *flowWorker) prepare(a store.Activation, state map[string]any) (*job, stepOutcome, bool) {
	ctx := f.hard
	e := f.e
	plan, err := e.Plan(ctx, a.Flow, a.Version)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, outcomeLeft, false
		}
		var fe *flows.Error
		if errors.As(err, &fe) && fe.Code == flows.NotFound {
			err = flows.Permanent(err)
		}
		return nil, f.fail(a, nil, err), false
	}
	node := plan.Nodes[a.Node]
	if node == nil {
		return nil, f.fail(a, plan, flows.Permanent(fmt.Errorf("version %.12s has no node %q", a.Version, a.Node))), false
	}
	var join *joined
	if state == nil {
		join, state, err = e.loadState(ctx, plan, a)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, outcomeLeft, false
		}
		var fe *flows.Error
		if errors.As(err, &fe) && fe.Code == flows.NotFound {
			// The run's state is gone (expired, or Redis lost it): nothing can resume it.
			if st, _ := e.rdb.RunStatus(ctx, a.Flow, a.Run); st == "" || store.Finished(st) {
				return nil, f.drop(a, plan), false
			}
			err = flows.Permanent(err)
		}
		return nil, f.fail(a, plan, err), false
	}
	step := &flows.Step{Flow: a.Flow, Run: a.Run, Node: a.Node, Version: a.Version, Depth: a.Depth, Attempt: a.Deliveries, State: state}
	if a.Resume != "" {
		step.Resume = []byte(a.Resume)
	}
	if node.Input != nil {
		in, err := node.Input.First(ctx, state, state)
		if err != nil {
			return nil, f.fail(a, plan, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: a.Node, Path: "input", Err: err})), false
		}
		step.Input = in
	} else {
		step.Input = state
	}
	step.Tools = node.Tools
	step.Emit = func(kind string, data any) { e.events.emit(a.Flow, a.Run, a.Node, kind, data) }
	step.SaveTurn = func(ctx context.Context, turn any) error {
		b, err := json.Marshal(flows.JSONValue(turn))
		if err != nil {
			return fmt.Errorf("turn is not JSON: %w", err)
		}
		_, err = e.rdb.SaveTurn(ctx, a, f.consumer, b)
		return err
	}
	if a.Deliveries > 1 {
		// A retry: pick up the turns the earlier attempts saved.
		if step.Turns, err = e.rdb.Turns(ctx, a); err != nil {
			return nil, f.fail(a, plan, err), false
		}
	}
	return &job{a: a, plan: plan, node: node, state: state, join: join, step: step}, 0, true
}

// execute runs a prepared step's component and builds its commit. ok is false when the
// step failed (and was recorded) or was left.
func (f *flowWorker) execute(j *job) (*built, stepOutcome, bool) {
	ctx, e, a, node := f.hard, f.e, j.a, j.node
	sctx, cancel := context.WithTimeout(ctx, node.Timeout)
	started := time.Now()
	// A step that takes a while shows as running in the live views.
	announce := time.AfterFunc(50*time.Millisecond, func() {
		e.events.emit(a.Flow, a.Run, a.Node, "start", map[string]any{"status": "running", "attempt": a.Deliveries})
	})
	res, err := runComponent(sctx, node.Component, j.step)
	announce.Stop()
	dur := time.Since(started)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, outcomeLeft, false
		}
		if sctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("step timed out after %s: %w", node.Timeout, err)
		}
		return nil, f.fail(a, j.plan, err), false
	}
	b, err := e.buildCommit(ctx, j.plan, node, a, f.consumer, j.state, j.join, res, dur)
	if err != nil {
		return nil, f.fail(a, j.plan, err), false
	}
	b.dur = dur
	return b, 0, true
}

// inlinable reports whether an activation's step can run in the read loop: its
// component says it needs no I/O and it is not a join (which reads its branches).
func (f *flowWorker) inlinable(a store.Activation) bool {
	if a.Join != "" || a.Deliveries > 1 {
		return false
	}
	p := f.e.cachedPlan(a.Flow, a.Version)
	if p == nil {
		return false
	}
	n := p.Nodes[a.Node]
	if n == nil {
		return false
	}
	in, ok := n.Component.(flows.Inliner)
	return ok && in.Inline()
}

// runInline runs a read's cheap steps right here: their missing states in one round
// trip, the components one after another, and all their commits in one pipeline.
func (f *flowWorker) runInline(acts []store.Activation, received time.Time) {
	ctx := f.hard
	states := make([]map[string]any, len(acts))
	var missing []store.StateRef
	var missingAt []int
	for i, a := range acts {
		if s, ok := f.e.cache.get(a.Run, a.Ckpt); ok {
			states[i] = s
		} else {
			missing = append(missing, store.StateRef{Run: a.Run, Ckpt: a.Ckpt})
			missingAt = append(missingAt, i)
		}
	}
	if len(missing) > 0 {
		raw, err := f.e.rdb.LoadStates(ctx, f.flow, missing)
		if err == nil {
			for k, b := range raw {
				if b == nil {
					continue // prepare reads it again and reports what is wrong
				}
				if s, err := flows.DecodeState(b); err == nil {
					states[missingAt[k]] = s
					f.e.cache.put(missing[k].Run, missing[k].Ckpt, s)
				}
			}
		}
	}
	var jobs []*job
	var builts []*built
	var commits []*store.Commit
	for i, a := range acts {
		j, _, ok := f.prepare(a, states[i])
		if !ok {
			continue
		}
		b, _, ok := f.execute(j)
		if !ok {
			continue
		}
		if !f.e.opts.NoFuse {
			f.fuse(j, b)
		}
		jobs, builts, commits = append(jobs, j), append(builts, b), append(commits, b.commit)
	}
	if len(commits) == 0 {
		return
	}
	// The commits go out while the reader reads on: a read's steps do not wait for the
	// previous read's commits, up to maxInlineBatches pipelines in flight.
	f.inlineSlots <- struct{}{}
	f.steps.Add(1)
	go func() {
		defer func() { <-f.inlineSlots; f.steps.Done() }()
		start := time.Now()
		results, errs := f.e.rdb.CommitBatch(ctx, commits)
		cdur := time.Since(start)
		for i, j := range jobs {
			if errs[i] != nil {
				// Unknown outcome: send it again through the commit queue (the fence
				// makes a second commit of the same entry harmless).
				f.commit(ctx, j.plan, j.a, builts[i], received)
				continue
			}
			f.committed(j.a, builts[i], results[i], cdur, received)
		}
	}()
}

// maxFused bounds how many steps one commit carries.
const maxFused = 16

// fuse runs, right after an inline step, its single successor when that is an inline
// step too (and the successor's, and so on), and commits them all with it: one
// checkpoint, state and event per step, as if each had been its own activation, but no
// stream entry, read or round trip in between. Such steps have no side effects, so if
// the worker dies before the commit, running them all again is harmless. Fusing stops at
// a fork, a join, an approval that parks, the end of the branch, a step that fails (it
// then runs on its own and fails as usual), or max_steps.
func (f *flowWorker) fuse(j *job, b *built) {
	c := b.commit
	prefix := store.FlowKeys(j.a.Flow).In("")
	a := j.a
	for k := 1; k <= maxFused; k++ {
		if c.Wait != nil || len(c.Ops) != 1 || c.Ops[0].Name != "xadd" || c.Ops[0].Args[1] != "$" {
			return
		}
		next := strings.TrimPrefix(c.Ops[0].Key, prefix)
		node := j.plan.Nodes[next]
		if node == nil || node.Spec == nil || node.Spec.Name == flows.JoinType || a.Depth+k > j.plan.Settings.MaxSteps {
			return
		}
		if in, ok := node.Component.(flows.Inliner); !ok || !in.Inline() {
			return
		}
		na := store.Activation{Flow: a.Flow, Node: next, ID: a.ID, Run: a.Run, Version: a.Version, Ckpt: "$prev",
			Tok: c.Ops[0].Args[2], Depth: a.Depth + k, Deliveries: 1}
		nb, err := f.runFused(j.plan, node, na, b.newState)
		if err != nil {
			return // it runs on its own, and fails there
		}
		nc := nb.commit
		c.Fused = append(c.Fused, store.CommitStep{Node: next, Checkpoint: nc.Checkpoint, State: nc.State, Usage: nc.Usage, Final: nc.Final, Event: nc.Event})
		c.Fused = append(c.Fused, nc.Fused...)
		c.Ops, c.Wait, c.WaitDeadline = nc.Ops, nc.Wait, nc.WaitDeadline
		b.newState, b.stateLen = nb.newState, nb.stateLen
		b.fused = append(b.fused, fusedStep{node: next, dur: nb.dur, usage: nc.Usage})
	}
}

// runFused runs one fused step: no failure is recorded, the caller stops fusing instead.
func (f *flowWorker) runFused(plan *flows.Plan, node *flows.PlanNode, a store.Activation, state map[string]any) (*built, error) {
	ctx := f.hard
	step := &flows.Step{Flow: a.Flow, Run: a.Run, Node: a.Node, Version: a.Version, Depth: a.Depth, Attempt: 1, State: state, Input: state, Tools: node.Tools,
		Emit: func(kind string, data any) { f.e.events.emit(a.Flow, a.Run, a.Node, kind, data) }}
	if node.Input != nil {
		in, err := node.Input.First(ctx, state, state)
		if err != nil {
			return nil, err
		}
		step.Input = in
	}
	sctx, cancel := context.WithTimeout(ctx, node.Timeout)
	started := time.Now()
	res, err := runComponent(sctx, node.Component, step)
	dur := time.Since(started)
	cancel()
	if err != nil {
		return nil, err
	}
	b, err := f.e.buildCommit(ctx, plan, node, a, f.consumer, state, nil, res, dur)
	if err != nil {
		return nil, err
	}
	b.dur = dur
	return b, nil
}

// maxInlineBatches bounds the pipelines of inline steps a flow worker has in flight.
const maxInlineBatches = 4

// commit sends a built commit, retrying while Redis is unreachable, for at most
// claim_after: after that another worker may own the entry anyway.
func (f *flowWorker) commit(ctx context.Context, plan *flows.Plan, a store.Activation, b *built, received time.Time) stepOutcome {
	deadline := time.Now().Add(plan.Settings.ClaimAfter.D())
	backoff := 20 * time.Millisecond
	for {
		res, cdur, err := f.e.commits.commit(ctx, b.commit)
		if err == nil {
			return f.committed(a, b, res, cdur, received)
		}
		f.e.log.Debug("commit failed; retrying", "flow", a.Flow, "run", a.Run, "node", a.Node, "error", err)
		if ctx.Err() != nil || time.Now().After(deadline) {
			f.e.log.Warn("commit failed; the step stays pending", "flow", a.Flow, "run", a.Run, "node", a.Node, "error", err)
			return outcomeLeft
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// committed handles a commit's reply.
func (f *flowWorker) committed(a store.Activation, b *built, res store.CommitResult, cdur time.Duration, received time.Time) stepOutcome {
	switch res.Status {
	case "ok":
		f.e.cache.put(a.Run, res.Ckpt, b.newState)
		if o := f.e.opts.Observer; o != nil {
			total := time.Since(received)
			o.StepDone(a.Flow, a.Node, StepTiming{Run: b.dur, Commit: cdur, Total: total}, b.commit.Usage)
			for _, fs := range b.fused {
				o.StepDone(a.Flow, fs.node, StepTiming{Run: fs.dur, Commit: cdur, Total: total}, fs.usage)
			}
		}
		return outcomeCommitted
	case "max_steps":
		f.e.log.Info("run failed: deeper than max_steps", "flow", a.Flow, "run", a.Run, "node", a.Node, "depth", res.Step)
		return outcomeCommitted
	default:
		f.e.log.Debug("step result dropped", "flow", a.Flow, "run", a.Run, "node", a.Node, "entry", a.ID, "why", res.Status, "run_status", res.RunStatus)
		return outcomeStale
	}
}

// drop commits nothing and acknowledges an activation whose run can no longer continue.
func (f *flowWorker) drop(a store.Activation, plan *flows.Plan) stepOutcome {
	c := &store.Commit{Act: a, Consumer: f.consumer, MaxSteps: plan.Settings.MaxSteps, TTL: plan.Settings.CheckpointTTL.D(), State: []byte("{}")}
	res, _, err := f.e.commits.commit(f.hard, c)
	if err != nil || res.Status != "dropped" {
		f.e.log.Warn("activation of a lost run", "flow", a.Flow, "run", a.Run, "node", a.Node, "status", res.Status, "error", err)
	}
	return outcomeStale
}

// fail records a failed step: retried later, or moved to the dead letters.
func (f *flowWorker) fail(a store.Activation, plan *flows.Plan, stepErr error) stepOutcome {
	settings := flows.DefaultSettings
	if plan != nil {
		settings = plan.Settings
	}
	msg := stepErr.Error()
	status, deliveries, err := f.e.rdb.Fail(f.hard, store.Failure{Act: a, Consumer: f.consumer, Error: truncate(msg, 4000),
		Permanent: isPermanent(stepErr), MaxAttempts: settings.MaxAttempts, TTL: settings.CheckpointTTL.D()})
	if err != nil {
		f.e.log.Warn("cannot record a failed step; it stays pending", "flow", a.Flow, "run", a.Run, "node", a.Node, "error", err, "step_error", msg)
		return outcomeLeft
	}
	if o := f.e.opts.Observer; o != nil {
		o.StepFailed(a.Flow, a.Node, status == "dead")
	}
	switch status {
	case "retry":
		f.e.log.Info("step failed; will retry", "flow", a.Flow, "run", a.Run, "node", a.Node, "attempt", deliveries, "error", firstLine(msg))
		return outcomeRetry
	case "dead":
		f.e.log.Warn("step moved to the dead letters", "flow", a.Flow, "run", a.Run, "node", a.Node, "attempts", deliveries, "error", firstLine(msg))
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

// sweepLoop hands entries that have been pending longer than claim_after — their
// worker crashed, hangs or lost its connection — to this worker.
func (f *flowWorker) sweepLoop(ctx context.Context) {
	for {
		f.mu.Lock()
		claimAfter := f.settings.ClaimAfter.D()
		f.mu.Unlock()
		every := min(max(claimAfter/4, 50*time.Millisecond), 5*time.Second)
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		f.sweep(ctx)
	}
}

func (f *flowWorker) sweep(ctx context.Context) {
	f.e.decideExpired(ctx, f.flow)
	if time.Since(f.lastPrune) > f.w.opts.Prune {
		f.lastPrune = time.Now()
		f.e.pruneRuns(ctx, f.flow)
	}
	f.mu.Lock()
	nodes := append([]string(nil), f.nodes...)
	settings := f.settings
	f.mu.Unlock()
	for _, n := range nodes {
		f.mu.Lock()
		free := f.limit(n) - len(f.inflight[n])
		f.mu.Unlock()
		if free <= 0 {
			continue
		}
		acts, deleted, err := f.e.rdb.AutoClaim(ctx, f.flow, n, f.consumer, settings.ClaimAfter.D(), free)
		if err != nil {
			if ctx.Err() == nil {
				f.e.log.Warn("sweeper: claim failed", "flow", f.flow, "node", n, "error", err)
			}
			return
		}
		if len(deleted) > 0 {
			f.e.log.Warn("sweeper: pending entries had been deleted; their runs cannot continue", "flow", f.flow, "node", n, "entries", deleted)
		}
		for _, a := range acts {
			f.e.log.Info("sweeper: took over a pending step", "flow", f.flow, "run", a.Run, "node", n, "entry", a.ID, "delivery", a.Deliveries)
			if a.Deliveries > settings.MaxAttempts {
				f.deadAfterCrashes(a)
				continue
			}
			f.start(a)
		}
	}
}

// deadAfterCrashes moves an entry that was delivered more than max_attempts times
// without ever recording an error (its workers crashed or hung) to the dead letters.
func (f *flowWorker) deadAfterCrashes(a store.Activation) {
	last := ""
	if r, err := f.e.rdb.GetRun(f.hard, a.Flow, a.Run); err == nil && r.LastError != "" {
		last = "; last error: " + r.LastError
	}
	f.fail(a, nil, flows.Permanent(fmt.Errorf("the step did not finish after %d deliveries (its workers stopped or timed out)%s", a.Deliveries-1, last)))
}

// heartbeatLoop keeps the idle time of long-running steps low so the sweeper does not
// hand them to another worker while they are still running here.
func (f *flowWorker) heartbeatLoop(ctx context.Context) {
	for {
		f.mu.Lock()
		every := max(f.settings.ClaimAfter.D()/3, 20*time.Millisecond)
		busy := 0
		for _, m := range f.inflight {
			busy += len(m)
		}
		f.mu.Unlock()
		// After ctx ends, in-flight steps keep their heartbeat through the grace period.
		if ctx.Err() != nil && busy == 0 {
			return
		}
		stop := ctx.Done()
		if ctx.Err() != nil {
			// Stopping: keep beating until the steps end, and look often whether they have.
			stop = nil
			every = min(every, 50*time.Millisecond)
		}
		select {
		case <-f.hard.Done():
			return
		case <-stop:
			continue
		case <-time.After(every):
		}
		f.mu.Lock()
		due := map[string][]string{}
		for n, m := range f.inflight {
			for id, started := range m {
				if time.Since(started) >= every {
					due[n] = append(due[n], id)
				}
			}
		}
		f.mu.Unlock()
		for n, ids := range due {
			hctx, cancel := context.WithTimeout(f.hard, 5*time.Second)
			if err := f.e.rdb.Heartbeat(hctx, f.flow, n, f.consumer, ids); err != nil && f.hard.Err() == nil {
				f.e.log.Debug("heartbeat failed", "flow", f.flow, "node", n, "error", err)
			}
			cancel()
		}
	}
}
