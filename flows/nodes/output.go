package nodes

import (
	"context"
	"encoding/json"

	"github.com/sluicehq/sluice/flows"
)

func outputSpec() flows.Spec {
	return flows.Spec{
		Name:     "output",
		Title:    "Output",
		Category: "io",
		Description: "Where a branch ends with a result. Its value (a jq expression over the state, the whole " +
			"state by default) becomes the run's output. With several output nodes, the output is an object " +
			"keyed by node id. An optional webhook receives the run's result when it finishes.",
		Ports: []flows.Port{{Name: flows.PortIn, Direction: "in", Type: flows.PortState, Multiple: true, Required: true, Description: "the run state"}},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false,
			"properties": {
				"value": {"type": "string", "format": "jq", "default": ".", "description": "jq over the state: the run's output."},
				"webhook": {"type": "string", "format": "uri", "pattern": "^https?://", "description": "When the run finishes, its result is POSTed here (at least once, signed, retried)."}
			}
		}`),
		Example: json.RawMessage(`{"value": "{answer: .answer}"}`),
		New:     newOutput,
	}
}

// Output ends a branch and records the run's output.
type Output struct {
	value   *flows.JQ
	webhook string
}

func newOutput(b *flows.Build) (flows.Component, error) {
	var p struct {
		Value   string `json:"value"`
		Webhook string `json:"webhook"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	q, err := flows.CompileJQ(p.Value)
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.value", Err: err}
	}
	return &Output{value: q, webhook: p.Webhook}, nil
}

// Run evaluates the output value.
func (o *Output) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	v, err := o.value.First(ctx, s.Input, s.State)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.value", Err: err})
	}
	return &flows.Result{Output: v, Final: true}, nil
}

// Webhook is where the run's result is sent when it finishes ("" for nowhere); the
// result dispatcher reads it.
func (o *Output) Webhook() string { return o.webhook }

var _ flows.Component = (*Output)(nil)
