package nodes

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/flows"
)

func subflowSpec(env *Env) flows.Spec {
	return flows.Spec{
		Name:     "subflow",
		Title:    "Subflow",
		Category: "flow",
		Description: "Runs another flow as one node: it starts a run of that flow (its current version) with the " +
			"value of input as the run's input, waits for it within the step's timeout, and stores the run's output " +
			"under \"as\". The child run is linked: the parent's checkpoint history records it, and a retried step " +
			"waits for the child it already started instead of starting another. Attached to an agent's tools port " +
			"the model runs the flow with the arguments tool_parameters describes. A flow cannot run itself.",
		Ports: []flows.Port{inPort, outPort, toolPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["flow"],
			"properties": {
				"flow": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$", "description": "Id of the flow to run; the server must know it (its library or Redis)."},
				"input": {"type": "string", "format": "jq", "default": ".", "description": "jq producing the child run's input from the node's input (or the tool's arguments)."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "result", "description": "State key the child run's output is stored under."},` + toolParams + `,` + toolArgsParam + `
			}
		}`),
		Example: json.RawMessage(`{"flow": "summarise", "input": "{text: .document}", "as": "summary"}`),
		New:     func(b *flows.Build) (flows.Component, error) { return newSubflow(env, b) },
	}
}

// Subflow runs another flow.
type Subflow struct {
	env   *Env
	flow  string
	input *flows.JQ
	as    string
	def   flows.ToolDef
}

func newSubflow(env *Env, b *flows.Build) (flows.Component, error) {
	var p struct {
		toolConfig
		Flow  string `json:"flow"`
		Input string `json:"input"`
		As    string `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	if b.Flow != nil && p.Flow == b.Flow.ID {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.flow", Message: fmt.Sprintf("flow %q cannot run itself as a subflow", p.Flow)}
	}
	q, err := flows.CompileJQ(p.Input)
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.input", Err: err}
	}
	s := &Subflow{env: env, flow: p.Flow, input: q, as: p.As}
	s.def = p.def(b, "Run the flow "+p.Flow+" and get its output.", json.RawMessage(`{"type": "object", "properties": {}}`))
	return s, nil
}

func (f *Subflow) run(ctx context.Context, s *flows.Step, data any) (*SubflowResult, any, error) {
	if f.env.Subflows == nil {
		return nil, nil, flows.Permanent(&flows.Error{Code: flows.Unavailable, Node: s.Node, Message: "this process cannot run subflows"})
	}
	in, err := f.input.First(ctx, data, s.State)
	if err != nil {
		return nil, nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.input", Err: err})
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.input", Err: err})
	}
	res, err := f.env.Subflows.RunSubflow(ctx, s, f.flow, b)
	if err != nil {
		return nil, nil, err
	}
	var out any
	if len(res.Output) > 0 {
		if out, err = flows.DecodeJSON(res.Output); err != nil {
			return nil, nil, fmt.Errorf("subflow %s run %s: output: %v", f.flow, res.Run, err)
		}
	}
	return res, out, nil
}

// Run runs the child flow with the node's input.
func (f *Subflow) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	res, out, err := f.run(ctx, s, s.Input)
	if err != nil {
		return nil, err
	}
	return &flows.Result{Output: out, Update: map[string]any{f.as: out}, Usage: res.Usage}, nil
}

// ToolDef offers the child flow to a model.
func (f *Subflow) ToolDef() flows.ToolDef { return f.def }

// Call runs the child flow with the model's arguments.
func (f *Subflow) Call(ctx context.Context, s *flows.Step, args json.RawMessage) (any, error) {
	in, err := toolInput(args)
	if err != nil {
		return nil, fmt.Errorf("the arguments are not JSON: %v", err)
	}
	_, out, err := f.run(ctx, s, in)
	return out, err
}

var (
	_ flows.Component = (*Subflow)(nil)
	_ flows.Tool      = (*Subflow)(nil)
)
