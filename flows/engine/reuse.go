package engine

import (
	"context"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// Reuse of recorded outputs in a replay: the original run's steps, each under the
// ReuseKey of its node's definition and input, ride on the replay's pins. A step of the
// replay whose key is among its node's gives the recorded result back instead of calling
// its component — the same path as a pin, so there is one way to give back a recorded
// output — and any other step runs.

// reuse is the recorded result for a step of node with input on plan, or nil.
func (p *Pin) reuse(plan *flows.Plan, node string, input any) *Pin {
	key := plan.ReuseKey(node, input)
	if r, ok := p.Recorded[key]; ok && key != "" {
		return &r
	}
	return nil
}

// recordedOutputs are the pins of a replay of orig (which ran on from) that reuse every
// step it committed of a node that calls something outside (models, agents, HTTP, ...):
// pure nodes cost nothing to run again. Joins, approvals and turns are left out.
func (e *Engine) recordedOutputs(ctx context.Context, orig *store.Run, from, to *flows.Plan) (map[string]Pin, error) {
	cps, err := e.Checkpoints(ctx, orig.Flow, orig.ID)
	if err != nil {
		return nil, err
	}
	out := map[string]Pin{}
	for _, c := range cps {
		if c.Kind != "step" || c.Parent == "" {
			continue
		}
		n := from.Nodes[c.Node]
		if n == nil || n.Pure() || n.IsJoin() || to.Nodes[c.Node] == nil || to.Nodes[c.Node].Pure() || to.Nodes[c.Node].IsJoin() {
			continue
		}
		state, err := e.stateAt(ctx, orig.Ref(), c.Parent)
		if err != nil {
			continue // trimmed by keep_last, or expired: that step runs again
		}
		var input any = state
		if n.Input != nil {
			if input, err = n.Input.First(ctx, state, state); err != nil {
				continue
			}
		}
		key := from.ReuseKey(c.Node, input)
		if key == "" {
			continue
		}
		p := out[c.Node]
		if p.Recorded == nil {
			p.Recorded = map[string]Pin{}
		}
		p.Recorded[key] = Pin{Output: c.Output, Update: c.Update, Ports: c.Ports}
		out[c.Node] = p
	}
	return out, nil
}
