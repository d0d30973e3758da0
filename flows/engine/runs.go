package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// StartOptions name a run and say where its result goes.
type StartOptions struct {
	// RunID, when set, names the run (it must be a valid id and new); otherwise one is
	// generated.
	RunID string
	// Webhook receives the run's result when it finishes.
	Webhook string
	// Caller is the step that started this run as a subflow, if any.
	Caller *Caller
	// Trigger says what started the run, e.g. "schedule:0"; empty for a call or a person.
	Trigger string
	// By is who started it, as the server knows them: a person's email, a key's
	// service and prefix, "SLUICE_TOKEN" (docs/teams.md); "" for the engine itself.
	By string
	// Tick is the schedule tick the run is for.
	Tick time.Time
	// Partitions, when set, places the run as if the flow had that many partitions,
	// whatever this process counts: a schedule tick's claim fixes it, so that every
	// scheduler tries to create the tick's run on the same partition.
	Partitions int
	// Pins hold the output of some nodes fixed for this run, by node id: a pinned step
	// does not run its component but gives back what the pin says, so a person can
	// debug the rest of a flow without calling a model again (n8n's pinned data).
	Pins map[string]Pin
	// ReplayOf is the run this one replays (see Replay).
	ReplayOf string
	// KeysOf is the run whose idempotency keys this run's calls send ("" its own).
	KeysOf string
	// Environment names the environment whose version plan is, when the run was
	// started through one: the run records it, and its subflows run that
	// environment's versions of their flows.
	Environment string
	// At, when set, starts the run at that node instead of the entry node, and the input
	// is the whole state the node sees (over the flow's declared defaults), not the entry
	// node's input: a test case of one node starts there with a recorded state and pays
	// for nothing before it.
	At string
}

// Pin is a node's fixed result: its output, its state update and the ports it chose
// (nil: every port), usually copied from a checkpoint of an earlier run.
type Pin struct {
	Output json.RawMessage `json:"output,omitempty"`
	Update json.RawMessage `json:"update,omitempty"`
	Ports  []string        `json:"ports,omitempty"`
	// Recorded, for a replay that reuses recorded outputs, holds the node's recorded
	// results by the ReuseKey of the step that gave them: a step whose key is among them
	// gives that result back, any other runs (see reuse.go).
	Recorded map[string]Pin `json:"recorded,omitempty"`
}

// checkPins refuses pins of nodes the plan does not have, of pure nodes and joins (a pin
// saves nothing there, and their steps do not look for pins) and updates that are not objects.
func checkPins(plan *flows.Plan, pins map[string]Pin) error {
	for id, p := range pins {
		n := plan.Nodes[id]
		path := "pins." + id
		switch {
		case n == nil:
			return &flows.Error{Code: flows.Invalid, Flow: plan.Flow, Path: path, Message: fmt.Sprintf("the flow has no node %q", id)}
		case n.Pure() || n.IsJoin():
			return &flows.Error{Code: flows.Invalid, Flow: plan.Flow, Node: id, Path: path, Message: fmt.Sprintf("node %q (%s) calls nothing outside: only nodes that do (models, agents, HTTP, subflows, ...) can be pinned", id, n.Type)}
		}
		if len(p.Update) > 0 {
			if _, err := flows.DecodeState(p.Update); err != nil {
				return &flows.Error{Code: flows.Invalid, Flow: plan.Flow, Node: id, Path: path + ".update", Message: "must be a JSON object (the state update)"}
			}
		}
		if len(p.Output) > 0 && !json.Valid(p.Output) {
			return &flows.Error{Code: flows.Invalid, Flow: plan.Flow, Node: id, Path: path + ".output", Message: "not JSON"}
		}
	}
	return nil
}

// startState is the state of a run started at node at: the declared defaults with the
// keys of state (an object) put over them as they are, without the reducers (the
// state is a recorded one, not an update).
func startState(plan *flows.Plan, at string, state any) (map[string]any, error) {
	if plan.Nodes[at] == nil {
		return nil, &flows.Error{Code: flows.Invalid, Flow: plan.Flow, Path: "start.node", Message: fmt.Sprintf("the flow has no node %q", at)}
	}
	obj, ok := state.(map[string]any)
	if !ok {
		return nil, &flows.Error{Code: flows.Invalid, Flow: plan.Flow, Path: "start.state", Message: fmt.Sprintf("the state a run starts with at a node is an object, got %s", flows.TypeName(state))}
	}
	out := make(map[string]any, len(plan.Defaults)+len(obj))
	for k, v := range plan.Defaults {
		out[k] = v
	}
	for k, v := range obj {
		out[k] = v
	}
	return out, nil
}

// Caller names the step of another run that started a run (a subflow).
type Caller struct {
	Flow, Run, Node string
}

// inputChecker is implemented by entry components that check a run's input.
type inputChecker interface {
	CheckInput(v any) error
}

// InitialState is the state a run of plan starts with: the declared defaults, then the
// input merged in with the flow's reducers. An input that is not an object is stored
// under "input".
func InitialState(plan *flows.Plan, input any) (map[string]any, error) {
	obj, ok := input.(map[string]any)
	if !ok {
		if input == nil {
			obj = map[string]any{}
		} else {
			obj = map[string]any{"input": input}
		}
	}
	state, err := plan.Reducers.Apply(plan.Defaults, obj)
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "input", Err: err}
	}
	return state, nil
}

// Start creates a run of plan with input (JSON; empty means {}) and returns its id. The
// plan's version is stored first, so workers anywhere can load it; starting a run does
// not make its version current.
func (e *Engine) Start(ctx context.Context, plan *flows.Plan, input json.RawMessage, opts StartOptions) (string, error) {
	var in any = map[string]any{}
	if len(input) > 0 {
		v, err := flows.DecodeJSON(input)
		if err != nil {
			return "", &flows.Error{Code: flows.Invalid, Path: "input", Message: "input is not JSON: " + err.Error()}
		}
		in = v
	}
	entry := plan.Entry
	var state map[string]any
	if opts.At != "" {
		var err error
		if state, err = startState(plan, opts.At, in); err != nil {
			return "", err
		}
		entry = opts.At
	} else {
		if ic, ok := plan.Nodes[plan.Entry].Component.(inputChecker); ok {
			if err := ic.CheckInput(in); err != nil {
				return "", err
			}
		}
		var err error
		if state, err = InitialState(plan, in); err != nil {
			return "", err
		}
	}
	id, err := runID(opts.RunID)
	if err != nil {
		return "", err
	}
	if err := e.StoreVersion(ctx, plan); err != nil {
		return "", err
	}
	inputJSON, _ := json.Marshal(in)
	var stateJSON []byte
	if sameAsInput(plan, in) {
		stateJSON = inputJSON // the same map: the same bytes
	} else {
		stateJSON, _ = json.Marshal(state)
	}
	if err := flows.CheckJSON("the input", inputJSON, plan.Settings.MaxStateBytes); err != nil {
		return "", &flows.Error{Code: flows.TooLarge, Flow: plan.Flow, Path: "input", Err: err}
	}
	if err := flows.CheckJSON("the initial state", stateJSON, plan.Settings.MaxStateBytes); err != nil {
		return "", &flows.Error{Code: flows.TooLarge, Flow: plan.Flow, Path: "input", Err: err}
	}
	cp := store.Checkpoint{Kind: "input", Update: inputJSON, Output: nil}
	fields := []string{"input", string(inputJSON)}
	if opts.Webhook != "" {
		fields = append(fields, "webhook", opts.Webhook)
	}
	if opts.Trigger != "" {
		fields = append(fields, "trigger", opts.Trigger)
	}
	if opts.By != "" {
		fields = append(fields, "by", opts.By)
	}
	if !opts.Tick.IsZero() {
		fields = append(fields, "tick", strconv.FormatInt(opts.Tick.UnixMilli(), 10))
	}
	if opts.Environment != "" {
		fields = append(fields, "env", opts.Environment)
	}
	if opts.ReplayOf != "" {
		fields = append(fields, "replay_of", opts.ReplayOf)
	}
	if opts.KeysOf != "" {
		fields = append(fields, "keys_of", opts.KeysOf)
	}
	if c := opts.Caller; c != nil {
		fields = append(fields, "caller_flow", c.Flow, "caller_run", c.Run, "caller_node", c.Node)
	}
	if len(opts.Pins) > 0 {
		if err := checkPins(plan, opts.Pins); err != nil {
			return "", err
		}
		b, _ := json.Marshal(opts.Pins)
		fields = append(fields, "pins", string(b))
	}
	part, err := e.place(ctx, plan, id, opts.RunID != "", opts.Partitions)
	if err != nil {
		return "", err
	}
	// A state is kept in this process only when a worker here may run the run's steps
	// (an API process whose workers run elsewhere would only fill its cache).
	local := e.tellWorkers(plan.Flow, part)
	traceFields, tp := runTraceFields(ctx, plan.Flow)
	fields = append(fields, traceFields...)
	args := store.StartArgs{Flow: plan.Flow, Run: id, Part: part, Version: plan.Version, State: stateJSON,
		Checkpoint: cp, Entries: []string{entry}, Fields: fields, Trace: tp, Fresh: opts.RunID == ""}
	if args.Fresh && local {
		args.Ckpt = store.FirstCkptID()
		if ok, err := e.startInline(ctx, plan, args, state, stateJSON); ok {
			if err != nil {
				return "", err
			}
			return id, nil
		}
		// The state is kept under the first checkpoint before the start is sent: a
		// worker of this process may read the first activation before the reply comes.
		e.cache.putJSON(plan.Flow, id, args.Ckpt, state, stateJSON)
	}
	ckpt, err := e.starts.start(ctx, args)
	if flows.ErrorCode(err) == flows.NotFound {
		// The run is created, but the version this process stored is gone (Redis
		// restarted empty): store it again; workers retry the run's first step until
		// they can read it.
		e.forgetStored(plan)
		err = e.StoreVersion(ctx, plan)
	}
	if err != nil {
		return "", err
	}
	if local && ckpt != args.Ckpt {
		e.cache.putJSON(plan.Flow, id, ckpt, state, stateJSON)
	}
	return id, nil
}

// sameAsInput reports whether a run's initial state is its input itself: an object, with
// no declared defaults and only replacing reducers on its keys (InitialState).
func sameAsInput(plan *flows.Plan, in any) bool {
	obj, ok := in.(map[string]any)
	if !ok || len(plan.Defaults) > 0 {
		return false
	}
	for k := range obj {
		if r := plan.Reducers[k]; r != "" && r != flows.Replace {
			return false
		}
	}
	return true
}

// partitions is how many partitions plan's runs are placed over.
func (e *Engine) partitions(plan *flows.Plan) int {
	n := plan.Settings.Partitions
	if n == 0 {
		n = e.opts.Partitions
	}
	return min(max(n, 1), store.MaxPartitions)
}

// place chooses the partition of a new run (over n partitions; 0: the flow's count) and
// makes sure readers read it. A run id the caller chose is refused when a run of that
// id lives on another partition (the flow's partition count changed since it started).
func (e *Engine) place(ctx context.Context, plan *flows.Plan, id string, chosen bool, n int) (int, error) {
	if n <= 0 {
		n = e.partitions(plan)
	}
	if err := e.rdb.UsePartitions(ctx, plan.Flow, n, sortedKeys(plan.Nodes)); err != nil {
		return 0, err
	}
	part := store.PartOf(id, n)
	if chosen {
		if counts, err := e.rdb.PartitionCounts(ctx, plan.Flow); err == nil && len(counts) > 1 {
			if r, err := e.rdb.GetRun(ctx, plan.Flow, id); err == nil && r.Part != part {
				return 0, &flows.Error{Code: flows.Conflict, Flow: plan.Flow, Message: fmt.Sprintf("run %q already exists", id)}
			}
		}
	}
	return part, nil
}

// runID is the id a new run gets: the one asked for, checked, or a new one.
func runID(asked string) (string, error) {
	if asked == "" {
		return NewRunID(), nil
	}
	if !flows.ValidID(asked) {
		return "", &flows.Error{Code: flows.Invalid, Path: "run_id", Message: fmt.Sprintf("run id %q: use lower-case letters, digits, '-' and '_'", asked)}
	}
	return asked, nil
}

// Get returns a run.
func (e *Engine) Get(ctx context.Context, flow, run string) (*store.Run, error) {
	if !flows.ValidFlowID(flow) || !flows.ValidID(run) {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no run %q", run)}
	}
	return e.rdb.GetRun(ctx, flow, run)
}

// Wait returns the run once it has finished or waits for a person, or when ctx ends
// (with ctx's error and the run as it was last seen). It is woken by the run's status
// events, not by reading the run over and over.
func (e *Engine) Wait(ctx context.Context, flow, run string) (*store.Run, error) {
	return e.waitUntil(ctx, flow, run, func(r *store.Run) bool {
		return store.Finished(r.Status) || r.Status == store.StatusWaiting
	})
}

// waitUntil returns the run once done says so, or when ctx ends (with ctx's error and
// the run as it was last seen), woken by the run's status events.
func (e *Engine) waitUntil(ctx context.Context, flow, run string, done func(*store.Run) bool) (*store.Run, error) {
	if !flows.ValidFlowID(flow) || !flows.ValidID(run) {
		return e.Get(ctx, flow, run)
	}
	wake, stop, err := e.watch.register(ctx, flow, run)
	if err != nil {
		return nil, err
	}
	defer stop()
	safety := e.watch.safetyTick()
	for {
		r, err := e.Get(ctx, flow, run)
		if err != nil {
			return nil, err
		}
		if done(r) {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-wake:
		case <-time.After(safety):
		}
	}
}

// Cancel cancels a run that has not finished: its steps in flight in this process stop
// at once (in other processes within about a second: see cancelWatch), its queued
// activations are acknowledged without running, no retry runs, its approvals are
// withdrawn and the subflow runs it started are cancelled too.
func (e *Engine) Cancel(ctx context.Context, flow, run string) error {
	r, err := e.Get(ctx, flow, run)
	if err != nil {
		return err
	}
	ttl := flows.DefaultSettings.CheckpointTTL.D()
	if p, err := e.Plan(ctx, flow, r.Version); err == nil {
		ttl = p.Settings.CheckpointTTL.D()
	}
	ref := r.Ref()
	if err := e.rdb.CancelRun(ctx, ref, ttl); err != nil {
		return err
	}
	e.cancelLocal(flow, run)
	e.cancelChildren(ctx, ref, 0)
	return nil
}

// cancelChildren cancels the subflow runs a run's steps started (their steps recorded
// them as turns), and theirs in turn.
func (e *Engine) cancelChildren(ctx context.Context, ref store.RunRef, depth int) {
	if depth > MaxSubflowDepth {
		return
	}
	cps, err := e.rdb.Checkpoints(ctx, ref, "-", 0)
	if err != nil {
		return
	}
	for _, c := range cps {
		if c.Kind != "turn" {
			continue
		}
		var t subflowTurn
		if json.Unmarshal(c.Update, &t) != nil || t.Subflow == nil {
			continue
		}
		child, err := e.rdb.FindRun(ctx, t.Subflow.Flow, t.Subflow.Run)
		if err != nil {
			continue
		}
		if err := e.rdb.CancelRun(ctx, child, e.ttlOf(ctx, child.Flow, "")); err == nil {
			e.cancelLocal(child.Flow, child.Run)
			e.cancelChildren(ctx, child, depth+1)
		}
	}
}

// ErrNotWaiting is returned by Resume for a run that waits for nobody.
var ErrNotWaiting = errors.New("run is not waiting")
