package nodes_test

import (
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
)

// The runtime merges the branches' updates before the join runs; the join itself adds
// nothing, so the merged state is what its successors see.
func TestJoinAddsNothingToTheMergedState(t *testing.T) {
	res, err := run(t, build(t, "join", `{}`), state(t, `{"results": [1, 2]}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Update != nil || res.Output != nil || res.Ports != nil || res.Items != nil || res.Final {
		t.Errorf("join result %+v, want an empty one", res)
	}
}

func TestJoinTakesNoParams(t *testing.T) {
	doc := `{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "j", "type": "join", "params": {"wait": "all"}}], "edges": [{"from": "in", "to": "j"}]}`
	ps := flows.Validate([]byte(doc), nodes.NewRegistry(nil), flows.DefaultLimits).Errors()
	if len(ps) != 1 || ps[0].Code != flows.CodeUnknownField || ps[0].Path != "nodes[1].params.wait" {
		t.Errorf("got %v, want unknown_field at nodes[1].params.wait", ps)
	}
}
