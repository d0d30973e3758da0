package nodes

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/flows"
)

func transformSpec() flows.Spec {
	return flows.Spec{
		Name:     "transform",
		Title:    "Transform",
		Category: "data",
		Description: "Computes a state update with jq. The expression sees the node's input (the whole state " +
			"unless the node has an input selector) and must produce an object, which is merged into the " +
			"state with the flow's reducers.",
		Ports: []flows.Port{inPort, outPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false, "required": ["expr"],
			"properties": {
				"expr": {"type": "string", "format": "jq", "description": "jq producing the state update, e.g. {total: (.items | length)}."}
			}
		}`),
		Example: json.RawMessage(`{"expr": "{total: (.items | map(.price) | add)}"}`),
		New:     newTransform,
	}
}

// Transform computes a state update with jq.
type Transform struct {
	expr *flows.JQ
}

func newTransform(b *flows.Build) (flows.Component, error) {
	var p struct {
		Expr string `json:"expr"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	q, err := flows.CompileJQ(p.Expr)
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.expr", Err: err}
	}
	return &Transform{expr: q}, nil
}

// Run evaluates the expression; a result that is not an object is a permanent error.
func (t *Transform) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	v, err := t.expr.First(ctx, s.Input, s.State)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.expr", Err: err})
	}
	if v == nil {
		return &flows.Result{}, nil
	}
	upd, ok := v.(map[string]any)
	if !ok {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.expr",
			Message: fmt.Sprintf("transform must produce an object (the state update), got %s", flows.TypeName(v))})
	}
	return &flows.Result{Output: upd, Update: upd}, nil
}

var _ flows.Component = (*Transform)(nil)
