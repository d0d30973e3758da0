package nodes

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/flows"
)

func fanoutSpec() flows.Spec {
	return flows.Spec{
		Name:     "fanout",
		Title:    "Fan-out",
		Category: "flow",
		Description: "Starts one branch per item of a list, like LangGraph's Send. Each branch sees the state " +
			"with its item under the key named by \"as\" (and its position under \"<as>_index\"). The branches " +
			"run in parallel and meet at the next join, which merges their updates in item order; an empty " +
			"list goes straight to the join. An item whose branch cannot start — a reducer refuses it, or the " +
			"branch's state would be larger than max_state_bytes — fails the step for good (no retry), naming " +
			"the item by its index (items[i]).",
		Ports: []flows.Port{inPort, outPort},
		Fans:  true,
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false,
			"properties": {
				"items": {"type": "string", "format": "jq", "default": ".items", "description": "jq producing the list to fan out over."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "item", "description": "State key each branch finds its item under."},
				"max_items": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 1000, "description": "A longer list fails the step."}
			}
		}`),
		Example: json.RawMessage(`{"items": ".documents", "as": "document"}`),
		New:     newFanout,
	}
}

// Fanout starts a branch per list item.
type Fanout struct {
	items *flows.JQ
	as    string
	max   int
}

func newFanout(b *flows.Build) (flows.Component, error) {
	var p struct {
		Items    string `json:"items"`
		As       string `json:"as"`
		MaxItems int    `json:"max_items"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	q, err := flows.CompileJQ(p.Items)
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.items", Err: err}
	}
	return &Fanout{items: q, as: p.As, max: p.MaxItems}, nil
}

// As is the state key each branch's item is stored under.
func (f *Fanout) As() string { return f.as }

// Run evaluates the list. Each item becomes one branch's seed update.
func (f *Fanout) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	v, err := f.items.First(ctx, s.Input, s.State)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.items", Err: err})
	}
	var list []any
	switch x := v.(type) {
	case nil:
	case []any:
		list = x
	default:
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.items",
			Message: fmt.Sprintf("items must be a list, got %s", flows.TypeName(v))})
	}
	if len(list) > f.max {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.items",
			Message: fmt.Sprintf("%d items, more than max_items (%d)", len(list), f.max)})
	}
	items := make([]any, len(list))
	for i, it := range list {
		items[i] = map[string]any{f.as: it, f.as + "_index": i}
	}
	return &flows.Result{Output: len(list), Items: items}, nil
}

var _ flows.Component = (*Fanout)(nil)
