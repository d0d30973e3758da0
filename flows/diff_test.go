package flows_test

import (
	"encoding/json"
	"testing"

	"github.com/sluicehq/sluice/flows"
)

func doc(t *testing.T, s string) *flows.Document {
	t.Helper()
	var d flows.Document
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func TestDiffDocuments(t *testing.T) {
	a := doc(t, `{"sluice": 1, "id": "f", "name": "A", "nodes": [
		{"id": "in", "type": "input", "position": {"x": 0, "y": 0}},
		{"id": "t", "type": "transform", "params": {"expr": "{a: 1}"}},
		{"id": "gone", "type": "transform", "params": {"expr": "{}"}},
		{"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "t"}, {"from": "t", "to": "gone"}, {"from": "gone", "to": "out", "condition": ".a"}]}`)
	b := doc(t, `{"sluice": 1, "id": "f", "name": "B", "nodes": [
		{"id": "in", "type": "input", "position": {"x": 50, "y": 50}},
		{"id": "t", "type": "transform", "params": {"expr": "{a: 2}"}, "timeout": "5s"},
		{"id": "new", "type": "transform", "params": {"expr": "{}"}},
		{"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "t"}, {"from": "t", "to": "new"}, {"from": "new", "to": "out"}]}`)
	d := flows.DiffDocuments(a, b)
	if len(d.NodesAdded) != 1 || d.NodesAdded[0] != "new" || len(d.NodesRemoved) != 1 || d.NodesRemoved[0] != "gone" {
		t.Errorf("nodes added %v, removed %v", d.NodesAdded, d.NodesRemoved)
	}
	if len(d.NodesChanged) != 1 || d.NodesChanged[0].Node != "t" || len(d.NodesChanged[0].Changes) != 2 ||
		d.NodesChanged[0].Changes[0].Path != "params.expr" || d.NodesChanged[0].Changes[1].Path != "timeout" {
		t.Errorf("nodes changed %+v (a moved node is not a change)", d.NodesChanged)
	}
	if len(d.EdgesAdded) != 2 || len(d.EdgesRemoved) != 2 || len(d.EdgesChanged) != 0 {
		t.Errorf("edges added %v, removed %v, changed %v", d.EdgesAdded, d.EdgesRemoved, d.EdgesChanged)
	}
	if len(d.Flow) != 1 || d.Flow[0].Path != "name" {
		t.Errorf("flow changes %+v", d.Flow)
	}
	if d.Empty() {
		t.Error("a diff with changes is empty")
	}
	same := flows.DiffDocuments(a, a)
	if !same.Empty() {
		t.Errorf("a document differs from itself: %+v", same)
	}
	if js, _ := json.Marshal(same); string(js) != `{"nodes_added":[],"nodes_removed":[],"nodes_changed":[],"edges_added":[],"edges_removed":[],"edges_changed":[],"flow":[]}` {
		t.Errorf("an empty diff is written %s; every list must be a list", js)
	}
	cond := doc(t, `{"sluice": 1, "id": "f", "nodes": [{"id": "a", "type": "input"}, {"id": "b", "type": "output"}], "edges": [{"from": "a", "to": "b", "condition": ".x"}]}`)
	cond2 := doc(t, `{"sluice": 1, "id": "f", "nodes": [{"id": "a", "type": "input"}, {"id": "b", "type": "output"}], "edges": [{"from": "a", "to": "b", "condition": ".y"}]}`)
	if d := flows.DiffDocuments(cond, cond2); len(d.EdgesChanged) != 1 || d.EdgesChanged[0].Changes[0].Path != "condition" {
		t.Errorf("a changed condition: %+v", d)
	}
}
