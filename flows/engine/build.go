package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// built is a finished step turned into what its commit records.
type built struct {
	step     store.CommitStep
	trans    []store.Transition
	newState map[string]any
	newJSON  []byte        // newState's JSON
	dur      time.Duration // the component's run time
	usage    flows.Usage
	comp     string   // the node's component type, for the observer
	turns    [][]byte // the step's turns saved with its commit (flows.Result.Turns), redacted
}

// build computes a finished step's state update, checkpoint and transitions: the
// output mapping and reducers give the new state (the state, the update and the output
// each within max_state_bytes and flows.MaxJSONDepth), the chosen ports and edge
// conditions the successors, and transitions what that does to the run.
func (e *Engine) build(ctx context.Context, j *job, consumer string, res *flows.Result, dur time.Duration) (*built, error) {
	plan, node, state := j.plan, j.node, j.state
	update, newState, err := stepUpdate(ctx, plan, node, state, res)
	if err != nil {
		return nil, err
	}
	stateJSON, checked := j.stateJSON, j.stateChecked
	if len(update) > 0 || stateJSON == nil {
		// A step that changes nothing keeps the state it read, whose JSON is usually at
		// hand: within a fused chain encoded and checked, or as it was committed, started
		// or loaded.
		if stateJSON, err = json.Marshal(newState); err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Message: "the state is not JSON", Err: err})
		}
		checked = false
	}
	if !checked {
		if err := flows.CheckJSON("the state after this step", stateJSON, plan.Settings.MaxStateBytes); err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.TooLarge, Node: node.ID, Err: err})
		}
	}
	cp := store.Checkpoint{Node: node.ID, Kind: "step", Parent: j.a.Ckpt, Attempt: j.a.Attempt(), Duration: dur,
		Usage: res.Usage, StateBytes: res.StateBytes, Ports: res.Ports, Worker: consumer, Pinned: res.Pinned}
	recorded := update
	switch {
	case j.join != nil:
		cp.Kind, cp.Branches = "join", j.join.arrivals
		if len(j.join.delta) > 0 {
			if recorded, err = plan.Reducers.Apply(j.join.delta, update); err != nil {
				return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Err: err})
			}
		}
	case j.a.Resume != "":
		cp.Kind = "resume"
	}
	if res.Wait != nil {
		cp.Kind = "wait"
	}
	if len(recorded) > 0 {
		if cp.Update, err = json.Marshal(recorded); err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Message: "the update is not JSON", Err: err})
		}
		if err := flows.CheckJSON("the step's update", cp.Update, plan.Settings.MaxStateBytes); err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.TooLarge, Node: node.ID, Err: err})
		}
	}
	if m, ok := res.Output.(map[string]any); ok && len(m) == 0 {
		cp.Output = jsonEmptyObject[:2:2] // a no-op transform's: no encoding
	} else if res.Output != nil {
		if cp.Output, err = json.Marshal(flows.JSONValue(res.Output)); err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Message: "the output is not JSON", Err: err})
		}
		// The output is stored with the checkpoint (and, for an output node, as the run's
		// output), so it must be as small, and as readable, as a state.
		if err := flows.CheckJSON("the step's output", cp.Output, plan.Settings.MaxStateBytes); err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.TooLarge, Node: node.ID, Err: err})
		}
	}
	// An input node's output is the state it read, byte for byte: its commit keeps it
	// once, as that state (store.packedBody), and readers of the history fill it in.
	cp.OutputIsState = j.join == nil && len(j.stateJSON) > 0 && bytes.Equal(cp.Output, j.stateJSON)
	b := &built{newState: newState, newJSON: stateJSON, dur: dur, usage: res.Usage, comp: componentOf(node),
		step: store.CommitStep{Node: node.ID, Checkpoint: cp, State: stateJSON}}
	if res.Final {
		b.step.Final = cp.Output
		if b.step.Final == nil {
			b.step.Final = jsonNull[:4:4]
		}
	}
	var succ []string
	if res.Wait == nil {
		if succ, err = successors(ctx, node, res.Ports, newState); err != nil {
			return nil, err
		}
	}
	if b.trans, err = transitions(plan, node, j.place(), res, newState, succ, time.Now()); err != nil {
		return nil, err
	}
	b.step.Event = stepEvent(cp.Kind, dur, res)
	// Only a step that saves turns (Step.SaveTurn: one with an activation of its own)
	// may return some: a fused step's or a start's commit has nowhere to put them.
	if len(res.Turns) > 0 && j.step.SaveTurn != nil {
		if b.turns, err = turnsJSON(plan.Flow, res.Turns); err != nil {
			return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Err: err})
		}
	}
	return b, nil
}

// turnsJSON encodes turns as Step.SaveTurn does: redacted.
func turnsJSON(flow string, turns []any) ([][]byte, error) {
	var out [][]byte
	for _, t := range turns {
		b, err := json.Marshal(flows.RedactData(flow, flows.JSONValue(t)))
		if err != nil {
			return nil, fmt.Errorf("turn is not JSON: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}

// jsonEmptyObject and jsonNull are shared JSON values, never written to (sliced to
// their length, an append copies them).
var (
	jsonEmptyObject = []byte("{}")
	jsonNull        = []byte("null")
)

// stepEvent is the live event of a finished step, {"duration_ms", "kind", "status"} and
// what else the step has to say (usage, a prompt, its ports, a pin), encoded as
// encoding/json would encode it. The common case, a step with nothing else to say, is
// written by hand: it is on every step's path.
func stepEvent(kind string, dur time.Duration, res *flows.Result) []byte {
	ms := float64(dur.Microseconds()) / 1000
	if res.Usage.InputTokens == 0 && res.Usage.OutputTokens == 0 && res.Wait == nil && len(res.Ports) == 0 && !res.Pinned && plainKind(kind) {
		b := make([]byte, 0, 64)
		b = append(b, `{"duration_ms":`...)
		b = strconv.AppendFloat(b, ms, 'f', -1, 64)
		b = append(b, `,"kind":"`...)
		b = append(b, kind...)
		return append(b, `","status":"done"}`...)
	}
	ev := map[string]any{"status": "done", "duration_ms": ms, "kind": kind}
	if res.Usage.InputTokens > 0 || res.Usage.OutputTokens > 0 {
		ev["usage"] = res.Usage
	}
	if res.Wait != nil {
		ev["status"] = "waiting"
		ev["prompt"] = res.Wait.Prompt
	}
	if len(res.Ports) > 0 {
		ev["ports"] = res.Ports
	}
	if res.Pinned {
		ev["pinned"] = true
	}
	raw, _ := json.Marshal(ev)
	return raw
}

// plainKind reports whether a checkpoint kind needs no escaping in JSON (the kinds are
// lower-case words).
func plainKind(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return k != ""
}

// stepUpdate is what a step's result does to the state: its update (the output mapping
// over its output, unless pinned, else the component's own) and the state after it,
// merged with the flow's reducers.
func stepUpdate(ctx context.Context, plan *flows.Plan, node *flows.PlanNode, state map[string]any, res *flows.Result) (map[string]any, map[string]any, error) {
	update := res.Update
	if node.Output != nil && !res.Pinned { // a pin holds the update as the step recorded it
		v, err := node.Output.First(ctx, flows.JSONValue(res.Output), state)
		if err != nil {
			return nil, nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Path: "output", Err: err})
		}
		m, ok := v.(map[string]any)
		if v != nil && !ok {
			return nil, nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Path: "output",
				Message: fmt.Sprintf("the output mapping must produce an object (the state update), got %s", flows.TypeName(v))})
		}
		update = m
	}
	if update != nil {
		update = flows.JSONValue(update).(map[string]any)
	}
	newState := state
	if len(update) > 0 {
		var err error
		if newState, err = plan.Reducers.Apply(state, update); err != nil {
			return nil, nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: node.ID, Err: err})
		}
	}
	return update, newState, nil
}

// newCommit is the commit of a built step (and of the steps fused after it).
func (w *Worker) newCommit(j *job, b *built) *store.Commit {
	s := j.plan.Settings
	n := 1
	if !w.e.opts.NoFuse {
		n = chainLen(j.plan, j.node)
	}
	steps := make([]store.CommitStep, 1, n) // a step is large: grown, a chain's cost 3× its size
	steps[0] = b.step
	return &store.Commit{Act: j.a, Consumer: w.consumer, MaxSteps: s.MaxSteps, TTL: s.CheckpointTTL.D(), KeepLast: s.KeepLast,
		Steps: steps, Transitions: b.trans, Turns: b.turns}
}
