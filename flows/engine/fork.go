package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// ForkOptions say how a fork starts.
type ForkOptions struct {
	// Current runs the fork on the flow's current version instead of the version the
	// original run started with.
	Current bool
	// RunID names the new run; empty generates one.
	RunID string
	// Plan, when set, is the version the fork runs on (Current is then ignored).
	Plan *flows.Plan
	// Replay records the new run as a replay of the original from the checkpoint
	// ("replay_of", trigger "replay") instead of a fork of it.
	Replay bool
	// Pins hold nodes' results for the new run (see StartOptions.Pins).
	Pins map[string]Pin
	// KeysOf is the run whose idempotency keys the new run's calls send ("" its own).
	KeysOf string
	// By is who forked (StartOptions.By).
	By string
	// Environment names the environment whose version Plan is, when the fork was
	// started through one: the new run records it (its subflows follow it).
	Environment string
}

// Fork starts a new run from checkpoint ckpt of run: the state after that checkpoint,
// with patch (a JSON merge patch, RFC 7386; empty for none) applied, continues where the
// original continued from it. The new run records its parent run and checkpoint; the
// original is untouched. It runs on the original's version unless opts.Current.
//
// A fork continues one line of work: forking from a step inside parallel branches
// continues that branch alone, and its join passes it through.
func (e *Engine) Fork(ctx context.Context, flow, run, ckpt string, patch json.RawMessage, opts ForkOptions) (string, error) {
	var p any
	if len(patch) > 0 {
		v, err := flows.DecodeJSON(patch)
		if err != nil {
			return "", &flows.Error{Code: flows.Invalid, Path: "patch", Message: "not JSON: " + err.Error()}
		}
		if _, ok := v.(map[string]any); !ok && v != nil {
			return "", &flows.Error{Code: flows.Invalid, Path: "patch", Message: fmt.Sprintf("a merge patch of the state is an object, got %s", flows.TypeName(v))}
		}
		p = v
	}
	orig, err := e.Get(ctx, flow, run)
	if err != nil {
		return "", err
	}
	c, err := e.Checkpoint(ctx, flow, run, ckpt)
	if err != nil {
		return "", err
	}
	if !c.IsState() || c.State == nil {
		return "", &flows.Error{Code: flows.Invalid, Flow: flow, Path: "checkpoint", Message: fmt.Sprintf("%s is a turn of a step, not a checkpoint of the state", ckpt)}
	}
	var plan *flows.Plan
	if opts.Plan != nil {
		plan = opts.Plan
	} else if opts.Current {
		plan, err = e.CurrentPlan(ctx, flow)
	} else {
		plan, err = e.Plan(ctx, flow, orig.Version)
	}
	if err != nil {
		return "", err
	}
	state, err := flows.DecodeState(c.State)
	if err != nil {
		return "", err
	}
	if p != nil {
		patched, _ := mergePatch(state, p).(map[string]any)
		state = patched
	}
	entries, err := forkEntries(ctx, plan, c, state)
	if err != nil {
		return "", err
	}
	id, err := runID(opts.RunID)
	if err != nil {
		return "", err
	}
	e.forgetStored(plan) // a fork is rare: make sure its version is in Redis
	if err := e.StoreVersion(ctx, plan); err != nil {
		return "", err
	}
	stateJSON, _ := json.Marshal(state)
	if err := flows.CheckJSON("the patched state", stateJSON, plan.Settings.MaxStateBytes); err != nil {
		return "", &flows.Error{Code: flows.TooLarge, Flow: flow, Path: "patch", Err: err}
	}
	var upd json.RawMessage
	if len(patch) > 0 {
		upd = patch
	}
	cp := store.Checkpoint{Kind: "input", Node: "", Update: upd}
	in := orig.Input
	if in == nil {
		in = json.RawMessage("{}")
	}
	part, err := e.place(ctx, plan, id, opts.RunID != "", 0)
	if err != nil {
		return "", err
	}
	traceFields, tp := runTraceFields(ctx, flow) // a fork is a run of its own: a trace of its own
	newCkpt, err := e.rdb.StartRun(ctx, store.StartArgs{Flow: flow, Run: id, Part: part, Version: plan.Version, State: stateJSON,
		Checkpoint: cp, Entries: entries, Trace: tp,
		Fields: append(forkFields(in, run, ckpt, opts), traceFields...)})
	if err != nil {
		return "", err
	}
	e.cache.put(flow, id, newCkpt, state)
	return id, nil
}

// forkEntries are the nodes a fork from checkpoint c starts at: the entry node for the
// run's first checkpoint, the approval itself for one that was waiting, else the nodes
// c's step activated, with edge conditions evaluated on the (patched) state.
func forkEntries(ctx context.Context, plan *flows.Plan, c *store.Checkpoint, state map[string]any) ([]string, error) {
	switch c.Kind {
	case "input":
		return []string{plan.Entry}, nil
	case "wait":
		if plan.Nodes[c.Node] == nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "checkpoint", Message: fmt.Sprintf("this version has no node %q", c.Node)}
		}
		return []string{c.Node}, nil
	}
	node := plan.Nodes[c.Node]
	if node == nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "checkpoint", Message: fmt.Sprintf("this version has no node %q", c.Node)}
	}
	succ, err := successors(ctx, node, c.Ports, state)
	if err != nil {
		return nil, err
	}
	if len(succ) == 0 {
		return nil, &flows.Error{Code: flows.Invalid, Path: "checkpoint", Message: fmt.Sprintf("nothing runs after checkpoint %s (node %q ends its branch)", c.ID, c.Node)}
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range succ {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, nil
}

// mergePatch applies a JSON merge patch (RFC 7386) to target.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	out := map[string]any{}
	if ok {
		for k, v := range t {
			out[k] = v
		}
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(out[k], v)
	}
	return out
}

// forkFields are the new run's fields that say where it comes from.
func forkFields(in json.RawMessage, run, ckpt string, opts ForkOptions) []string {
	f := []string{"input", string(in)}
	if opts.Replay {
		f = append(f, "replay_of", run, "replay_of_ckpt", ckpt, "trigger", "replay")
	} else {
		f = append(f, "parent_run", run, "parent_ckpt", ckpt)
	}
	if len(opts.Pins) > 0 {
		b, _ := json.Marshal(opts.Pins)
		f = append(f, "pins", string(b))
	}
	if opts.KeysOf != "" {
		f = append(f, "keys_of", opts.KeysOf)
	}
	if opts.By != "" {
		f = append(f, "by", opts.By)
	}
	if opts.Environment != "" {
		f = append(f, "env", opts.Environment)
	}
	return f
}
