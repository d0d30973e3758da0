package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"go.opentelemetry.io/otel/trace"
)

// A step goes through stages, one concern each, in this order:
//
//	read.go       the reader: XREADGROUP over the served nodes' streams, and one round
//	              trip for the batch's states and run statuses
//	step.go       gate: the plan and node, the state (or a join's merged branches), and
//	              whether the run may go on (a cancelled or lost run's step is dropped;
//	              cancelled.go remembers the runs this process saw cancelled)
//	execute.go    execute: the component under its deadline, with panic recovery, the
//	              live "running" event and the run's cancellation
//	build.go      transition: the state update, the checkpoint and the transitions
//	fuse.go       fusion of pure successors into the same commit
//	commit.go     commit: batched commit scripts, and what their replies mean
//	retry.go      the retry policy around all of it
//
// The worker (worker.go) owns the goroutines; the sweeper (sweep.go) and heartbeats
// (heartbeat.go) look after steps of processes that died.

// stepOutcome is what happened to one activation, for the worker's bookkeeping.
type stepOutcome int

const (
	outcomeCommitted stepOutcome = iota
	outcomeStale                 // someone else committed it, or the run was gone or cancelled
	outcomeRetry                 // failed; still pending for another attempt
	outcomeDead                  // moved to the dead letters
	outcomeLeft                  // left pending (shutdown, Redis unreachable)
)

// job is an activation that passed the gate: ready to run.
type job struct {
	a     store.Activation
	plan  *flows.Plan
	node  *flows.PlanNode
	state map[string]any
	// stateJSON is state's JSON when it is at hand (a step fused after another, a state
	// this process committed, started or loaded); nil otherwise. stateChecked says it
	// was checked against this plan's limits (a fused step's is).
	stateJSON    []byte
	stateChecked bool
	join         *joined
	// boundedOnly says the step runs where only steps that finish in bounded time may
	// (a reader's goroutine, a start: inline.go, startinline.go): the steps fused after
	// it must be StepBounded too.
	boundedOnly bool
	step        *flows.Step // &stepv
	stepv       flows.Step
	pin         *Pin // the node's output is pinned for this run: the component does not run
	// emitted is set once the step emitted a live event (withAnnounce): its commit
	// waits until those are in Redis (eventBatcher.barrier).
	emitted atomic.Bool
	// ctx and span are the step's trace span and the context under it (trace.go);
	// nil while tracing is off.
	ctx  context.Context
	span trace.Span
}

// newJob is the job of activation a of node, reading state: its step (j.step) has the
// activation's coordinates and emits its node's live events.
func (e *Engine) newJob(a store.Activation, plan *flows.Plan, node *flows.PlanNode, state map[string]any) *job {
	j := &job{a: a, plan: plan, node: node, state: state}
	j.stepv = flows.Step{Flow: a.Flow, Run: a.Run, Node: a.Node, Version: a.Version, Depth: a.Depth, Attempt: a.Deliveries, Branch: a.Tok,
		State: state, Input: state, Tools: node.Tools}
	j.stepv.Emit = func(kind string, data any) { e.events.emit(j.a.Ref(), j.a.Node, kind, data) }
	j.step = &j.stepv
	return j
}

// place is where the job's step sits, for routing.
func (j *job) place() stepPlace {
	return stepPlace{Entry: j.a.ID, Tokens: parseTokens(j.a.Tok), Join: j.a.Join, Depth: j.a.Depth}
}

// preloaded is what the reader fetched for an activation in its batch round trip.
type preloaded struct {
	state  map[string]any // nil: not loaded (a join, a cache miss that failed)
	raw    []byte         // state's JSON, when at hand
	status string         // the run's status; "" unknown or gone
	pins   string         // the run's pins (JSON), when status was read
	keysOf string         // the run whose idempotency keys it sends, when status was read
	known  bool           // status was read
}

// gateVerdict is the gate's decision on an activation. The gate writes nothing: it reads
// what the step needs and decides, and the worker applies a verdict other than run
// (apply) through the committer's scripts.
type gateVerdict struct {
	kind gateKind
	job  *job // verdictRun: the step, ready to run
	// verdictFail: the step's failure (retried or dead-lettered by the failure script),
	// with the plan and node when they are known, for its attempts and TTL.
	err  error
	plan *flows.Plan
	node *flows.PlanNode
	// cancelled: the run was seen cancelled in Redis (verdictDrop), for this process to
	// remember.
	cancelled bool
}

type gateKind int

const (
	verdictRun   gateKind = iota
	verdictDrop           // a cancelled or lost run: acknowledged without running
	verdictFail           // recorded as a failed attempt
	verdictLeave          // left pending: the worker is stopping
)

// apply carries out a verdict that is not verdictRun.
func (w *Worker) apply(a store.Activation, v gateVerdict) stepOutcome {
	switch v.kind {
	case verdictDrop:
		if v.cancelled {
			w.e.cancelled.add(a.Flow, a.Run)
		}
		return w.drop(a, v.plan, nil)
	case verdictFail:
		return w.fail(a, v.plan, v.node, v.err, 0)
	}
	return outcomeLeft
}

// runGoesOn is the gate's rule on a run's status: a step runs unless its run is gone,
// cancelled, or finished other than failed (a failed run's branches still in flight may
// commit their steps: a retried dead letter reopens it). known says the status was read;
// when it was not (a pure step whose state was in this process), the step runs unless
// this process saw the run cancelled — a cancel made elsewhere then only refuses its
// commit. cancelled says the status read was cancelled.
func runGoesOn(status string, known, cancelledHere bool) (goOn, cancelled bool) {
	if !known {
		return !cancelledHere, false
	}
	if status == "" || status == store.StatusCancelled || store.Finished(status) && status != store.StatusFailed {
		return false, status == store.StatusCancelled
	}
	return true, false
}

// gate loads what a step needs and decides whether it may run: its plan and node, its
// state, and that its run is still going (runGoesOn). A step with side effects reads its
// run's status (and pins) when the reader's batch read did not. A pure step reads nothing
// more. It writes nothing to Redis: a step that may not run comes back as a verdict
// for apply.
func (w *Worker) gate(a store.Activation, pre preloaded) gateVerdict {
	ctx, e := w.hard, w.e
	leave := gateVerdict{kind: verdictLeave}
	fail := func(plan *flows.Plan, node *flows.PlanNode, err error) gateVerdict {
		return gateVerdict{kind: verdictFail, err: err, plan: plan, node: node}
	}
	plan, err := e.Plan(ctx, a.Flow, a.Version)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return leave
		}
		// A version not found is retried like any error: the process that started the
		// run stores it again when Redis had lost it (see Start).
		return fail(nil, nil, err)
	}
	node := plan.Nodes[a.Node]
	if node == nil {
		return fail(plan, nil, flows.Permanent(fmt.Errorf("version %.12s has no node %q", a.Version, a.Node)))
	}
	var pin *Pin
	isPure := node.Pure()
	status, pins, keysOf, known := pre.status, pre.pins, pre.keysOf, pre.known
	if !known && !isPure {
		g, err := e.rdb.StepGate(ctx, a.Ref())
		if err != nil {
			if ctx.Err() != nil {
				return leave
			}
			return fail(plan, node, err)
		}
		status, pins, keysOf, known = g.Status, g.Pins, g.KeysOf, true
	}
	if goOn, cancelled := runGoesOn(status, known, e.cancelled.has(a.Flow, a.Run)); !goOn {
		return gateVerdict{kind: verdictDrop, plan: plan, cancelled: cancelled}
	}
	if !isPure && !node.IsJoin() && pins != "" { // a join calls nothing: it is never pinned
		var all map[string]Pin
		if json.Unmarshal([]byte(pins), &all) == nil {
			if p, ok := all[a.Node]; ok {
				pin = &p
			}
		}
	}
	var join *joined
	state, stateJSON := pre.state, pre.raw
	if state == nil {
		join, state, err = e.loadState(ctx, plan, a)
	}
	if err != nil {
		if ctx.Err() != nil {
			return leave
		}
		if flows.ErrorCode(err) == flows.NotFound {
			// The run's state is gone (expired, or Redis lost it): nothing can resume it.
			if st, _ := e.rdb.RunStatus(ctx, a.Ref()); st == "" || store.Finished(st) {
				return gateVerdict{kind: verdictDrop, plan: plan}
			}
			err = flows.Permanent(err)
		}
		return fail(plan, node, err)
	}
	j := e.newJob(a, plan, node, state)
	j.stateJSON, j.join = stateJSON, join
	step := j.step
	step.KeysOf = keysOf
	if a.Resume != "" {
		step.Resume = []byte(a.Resume)
	}
	if node.Input != nil {
		in, err := node.Input.First(ctx, state, state)
		if err != nil {
			return fail(plan, node, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: a.Node, Path: "input", Err: err}))
		}
		step.Input = in
	}
	if pin != nil && pin.Recorded != nil {
		pin = pin.reuse(plan, a.Node, step.Input) // nil: the input or the node changed, so it runs
	}
	step.SaveTurn = func(ctx context.Context, turn any) error {
		b, err := turnsJSON(plan.Flow, []any{turn})
		if err != nil {
			return err
		}
		_, err = e.rdb.SaveTurn(ctx, j.a, w.consumer, b[0])
		return err
	}
	if a.Deliveries > 1 {
		// A retry: pick up the turns the earlier attempts saved.
		if step.Turns, err = e.rdb.Turns(ctx, a); err != nil {
			return fail(plan, node, err)
		}
	}
	j.pin = pin
	return gateVerdict{job: j}
}

// loadState returns the state an activation reads: its checkpoint's, or for a join the
// state at the fork with every arriving branch's updates merged in branch order.
func (e *Engine) loadState(ctx context.Context, plan *flows.Plan, act store.Activation) (*joined, map[string]any, error) {
	if act.Join != "" {
		j, err := e.joinState(ctx, plan, act)
		if err != nil {
			return nil, nil, err
		}
		return j, j.state, nil
	}
	s, err := e.stateAt(ctx, act.Ref(), act.Ckpt)
	return nil, s, err
}

// joined is the merge of a fork's branches.
type joined struct {
	state    map[string]any // the state at the fork with every branch's updates
	arrivals []string       // checkpoints of the arriving branches, in branch order
	// delta is all branch updates composed with the reducers: the join's checkpoint
	// records it as its update, so an outer join walking through this one sees them.
	delta map[string]any
}

func (e *Engine) stateAt(ctx context.Context, ref store.RunRef, ckpt string) (map[string]any, error) {
	if s, _, ok := e.cache.get(ref.Flow, ref.Run, ckpt); ok {
		return s, nil
	}
	b, err := e.rdb.LoadState(ctx, ref, ckpt)
	if err != nil {
		return nil, err
	}
	s, err := flows.DecodeState(b)
	if err != nil {
		return nil, flows.Permanent(fmt.Errorf("checkpoint %s: %w", ckpt, err))
	}
	e.cache.putJSON(ref.Flow, ref.Run, ckpt, s, b)
	return s, nil
}

// joinState merges the branches of a completed fork. Each branch's updates are those of
// the checkpoints between the fork and its arrival; a checkpoint two branches share (a
// branch that forked again towards the same join) counts once, for the first of them.
// The seed checkpoints of a fanout are left out: a branch's item is its own.
func (e *Engine) joinState(ctx context.Context, plan *flows.Plan, act store.Activation) (*joined, error) {
	fr, err := e.rdb.GetFrame(ctx, act.Ref(), act.Join)
	if err != nil {
		return nil, err
	}
	base, err := e.stateAt(ctx, act.Ref(), fr.Base)
	if err != nil {
		return nil, err
	}
	branches := make([]string, 0, len(fr.Branches))
	for b := range fr.Branches {
		branches = append(branches, b)
	}
	sortBranches(branches)
	arrivals := make([]string, len(branches))
	for i, b := range branches {
		arrivals[i] = fr.Branches[b]
	}
	if len(branches) == 0 {
		return &joined{state: base, arrivals: arrivals}, nil
	}
	// The branches' checkpoints come after the base's entry (a base is a whole entry: a
	// commit's last step or a seed), which the walk below does not read.
	from := fr.Base
	if !strings.Contains(from, ".") {
		from = "(" + from
	}
	cps, err := e.rdb.Checkpoints(ctx, act.Ref(), from, 0)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*store.Checkpoint, len(cps))
	for i := range cps {
		if cps[i].IsState() {
			byID[cps[i].ID] = &cps[i]
		}
	}
	var ups []branchUpdate
	seen := map[string]bool{}
	for _, arrival := range arrivals {
		var path []*store.Checkpoint
		for id := arrival; id != "" && id != fr.Base && !seen[id]; {
			c, ok := byID[id]
			if !ok {
				return nil, flows.Permanent(fmt.Errorf("join: checkpoint %s of a branch is missing", id))
			}
			seen[id] = true
			path = append(path, c)
			id = c.Parent
		}
		for i := len(path) - 1; i >= 0; i-- {
			if c := path[i]; c.Kind != "send" {
				ups = append(ups, branchUpdate{of: "checkpoint " + c.ID, update: c.Update})
			}
		}
	}
	state, delta, err := mergeBranches(plan, base, ups)
	if err != nil {
		return nil, err
	}
	return &joined{state: state, arrivals: arrivals, delta: delta}, nil
}

// branchUpdate is a branch step's update, as a join merges it; of names the step.
type branchUpdate struct {
	of     string
	update []byte
}

// mergeBranches is how a join merges its branches, for both the joins that read them
// back (joinState) and those run in the commit the branches ran in (joinInline):
// each branch's updates, the branches in branch order and each's oldest first,
// applied with the flow's reducers to base (the state at the fork) give the join's
// state, and composed on their own its delta.
func mergeBranches(plan *flows.Plan, base map[string]any, ups []branchUpdate) (state, delta map[string]any, err error) {
	state, delta = base, map[string]any{}
	for _, u := range ups {
		if len(u.update) == 0 {
			continue
		}
		upd, err := flows.DecodeState(u.update)
		if err != nil {
			return nil, nil, flows.Permanent(fmt.Errorf("join: update of %s: %w", u.of, err))
		}
		if state, err = plan.Reducers.Apply(state, upd); err != nil {
			return nil, nil, flows.Permanent(fmt.Errorf("join: merging branch of %s: %w", u.of, err))
		}
		if delta, err = plan.Reducers.Apply(delta, upd); err != nil {
			return nil, nil, flows.Permanent(fmt.Errorf("join: merging branch of %s: %w", u.of, err))
		}
	}
	return state, delta, nil
}

// isPermanent decides how a failed step is recorded.
func isPermanent(err error) bool {
	if flows.IsPermanent(err) {
		return true
	}
	var fe *flows.Error
	return errors.As(err, &fe) && fe.Code == flows.Invalid
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
