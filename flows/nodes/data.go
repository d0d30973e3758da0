package nodes

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/flows"
)

func dataSpec() flows.Spec {
	return flows.Spec{
		Name:     "data",
		Title:    "Data",
		Category: "tools",
		Description: "A jq query over the run state, run with a deadline (2 s) and no access to the environment. " +
			"Attached to an agent's tools port it is the agent's gateway to the state: the model asks for just the " +
			"slice it needs (\".pdf_data.sections[] | select(.type == \\\"ingredients\\\")\") instead of being given " +
			"everything, which article 003 reports saves 70–90% of the tokens; the bytes of state each step showed a " +
			"model are recorded on its checkpoint (state_bytes). As a step it stores the query's result under \"as\".",
		Ports: []flows.Port{inPort, outPort, toolPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false,
			"properties": {
				"query": {"type": "string", "format": "jq", "description": "jq over the node's input (as a step). As a tool the model writes the query."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "data", "description": "State key the result is stored under (as a step)."},
				"max_bytes": {"type": "integer", "minimum": 1, "maximum": 16777216, "default": 262144, "description": "A larger result is refused (the model is told to ask for less)."},` + toolParams + `
			}
		}`),
		Example: json.RawMessage(`{"tool_name": "query_state", "tool_description": "Query the parsed document with jq. The state has pdf_data.sections[] ({type, text}) and pdf_data.claims[] ({text, page, regulatory_relevant})."}`),
		New:     newData,
	}
}

// Data queries the run state.
type Data struct {
	query *flows.JQ
	as    string
	max   int
	def   flows.ToolDef
}

var dataToolArgs = json.RawMessage(`{"type": "object", "required": ["query"], "additionalProperties": false,
	"properties": {"query": {"type": "string", "description": "A jq expression over the run state, e.g. .items[] | select(.price > 10) | {name, price}"}}}`)

func newData(b *flows.Build) (flows.Component, error) {
	var p struct {
		toolConfig
		Query    string `json:"query"`
		As       string `json:"as"`
		MaxBytes int    `json:"max_bytes"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	d := &Data{as: p.As, max: p.MaxBytes}
	if p.Query != "" {
		q, err := flows.CompileJQ(p.Query)
		if err != nil {
			return nil, &flows.Error{Code: flows.Invalid, Path: "params.query", Err: err}
		}
		d.query = q
	}
	p.ToolParameters = nil
	d.def = p.def(b, "Query the run state with jq and get back only the matching part. Ask for small, specific slices.", dataToolArgs)
	return d, nil
}

// eval runs q and returns its result (one output as itself, several as a list) and its
// JSON.
func (d *Data) eval(ctx context.Context, q *flows.JQ, in any, state map[string]any) (any, []byte, error) {
	outs, err := q.All(ctx, in, state)
	if err != nil {
		return nil, nil, err
	}
	var v any
	switch len(outs) {
	case 0:
	case 1:
		v = outs[0]
	default:
		v = outs
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	if len(b) > d.max {
		return nil, nil, fmt.Errorf("the result is %d bytes, more than max_bytes (%d): ask for a smaller slice", len(b), d.max)
	}
	return v, b, nil
}

// Run stores the query's result.
func (d *Data) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	if d.query == nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.query",
			Message: "a data step needs a query; without one the node only works as an agent's tool"})
	}
	v, b, err := d.eval(ctx, d.query, s.Input, s.State)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.query", Err: err})
	}
	return &flows.Result{Output: v, Update: map[string]any{d.as: v}, StateBytes: len(b)}, nil
}

// ToolDef offers the query to a model.
func (d *Data) ToolDef() flows.ToolDef { return d.def }

// Call runs the model's query over the whole run state.
func (d *Data) Call(ctx context.Context, s *flows.Step, args json.RawMessage) (any, error) {
	var a struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.Query == "" {
		return nil, fmt.Errorf("call it with {\"query\": \"<jq expression>\"}")
	}
	q, err := flows.CompileJQ(a.Query)
	if err != nil {
		return nil, err
	}
	_, b, err := d.eval(ctx, q, s.State, s.State)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(b), nil
}

func (d *Data) readsState() {}

var (
	_ flows.Component = (*Data)(nil)
	_ flows.Tool      = (*Data)(nil)
	_ stateReader     = (*Data)(nil)
)
