package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// Trial is one node run alone on a state, outside any run: what the editor's "Run this
// node" shows. Nothing of it is stored.
type Trial struct {
	Node string `json:"node"`
	// Input is what the node saw: the state through its input selector.
	Input any `json:"input"`
	// Output, Update and State are the component's output, the state update it makes
	// and the state after it (with the flow's reducers), as a step's checkpoint would
	// record them.
	Output any            `json:"output"`
	Update map[string]any `json:"update,omitempty"`
	State  map[string]any `json:"state,omitempty"`
	// Ports are the output ports the step chose; Next the nodes it would activate.
	Ports []string `json:"ports,omitempty"`
	Next  []string `json:"next"`
	// Waits is the approval prompt when the node would park the run.
	Waits      string      `json:"waits,omitempty"`
	Usage      flows.Usage `json:"usage"`
	DurationMS float64     `json:"duration_ms"`
	// Error is why the node failed (with Retryable when a run would try it again).
	Error     string `json:"error,omitempty"`
	Retryable bool   `json:"retryable,omitempty"`
}

// TryNode runs node of plan once on state, as a worker would run its step — under the
// node's timeout, a panic recovered, secrets redacted from what comes back, its tools
// attached — but in this process and outside any run: nothing is committed, no event is
// sent, no retry is made. Its idempotency keys are the trial's own (run "try-…").
// n8n's "execute step" and Langflow's "run component" do the same.
func (e *Engine) TryNode(ctx context.Context, plan *flows.Plan, node string, state map[string]any) (*Trial, error) {
	n := plan.Nodes[node]
	if n == nil {
		return nil, &flows.Error{Code: flows.NotFound, Flow: plan.Flow, Node: node, Message: fmt.Sprintf("flow %s has no node %q", plan.Flow, node)}
	}
	if state == nil {
		state = map[string]any{}
	}
	state = flows.JSONValue(state).(map[string]any)
	step := &flows.Step{Flow: plan.Flow, Run: "try-" + NewRunID(), Node: node, Version: plan.Version, Depth: 1, Attempt: 1,
		State: state, Input: state, Tools: n.Tools, Emit: func(string, any) {}}
	if n.Input != nil {
		in, err := n.Input.First(ctx, state, state)
		if err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Flow: plan.Flow, Node: node, Path: "input", Err: err}
		}
		step.Input = in
	}
	t := &Trial{Node: node, Input: step.Input, Next: []string{}}
	j := &job{plan: plan, node: n, state: state, step: step}
	started := time.Now()
	res, err := chain(component, withDeadline, withRecover)(ctx, j)
	t.DurationMS = float64(time.Since(started).Microseconds()) / 1000
	if err == nil {
		t.Output, t.Ports, t.Usage = res.Output, res.Ports, res.Usage
		if res.Wait != nil {
			t.Waits = res.Wait.Prompt
		}
		t.Update, t.State, err = stepUpdate(ctx, plan, n, state, res)
	}
	if err == nil && res.Wait == nil {
		t.Next, err = successors(ctx, n, res.Ports, t.State)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		_, err = flows.RedactStep(plan.Flow, nil, err)
		t.Error, t.Retryable = err.Error(), !flows.IsPermanent(err)
	}
	if t.Next == nil {
		t.Next = []string{}
	}
	return t, nil
}
