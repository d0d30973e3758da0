package server

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
)

// queueNotes names where the steps of a node without consumers run. A note that says
// "inline" must match what the engine fuses (flows/engine/fuse.go): a pure step right
// after a step (of any node but a fanout) that started exactly one node, or a pure target
// of a fork that step opened.
func TestQueueNotesSayInlineOnlyWhereTheEngineFuses(t *testing.T) {
	const (
		afterIn    = "runs inline after in: fused into that step, on the worker that runs it"
		afterRoute = "runs inline after route: fused into that step, on the worker that runs it"
		maybeIn    = "runs inline after in when that step starts no other node (else a worker reads it): fused into that step, on the worker that runs it"
	)
	transform := func(id string) map[string]any {
		return map[string]any{"id": id, "type": "transform", "params": map[string]any{"expr": "{}"}}
	}
	node := func(id, typ string) map[string]any { return map[string]any{"id": id, "type": typ} }
	edge := func(from, to string) map[string]any { return map[string]any{"from": from, "to": to} }
	for _, tc := range []struct {
		name  string
		nodes []map[string]any
		edges []map[string]any
		want  map[string]string
	}{
		{
			name:  "a step after an inline step that starts only it runs inline",
			nodes: []map[string]any{node("in", "input"), transform("t"), node("out", "output")},
			edges: []map[string]any{edge("in", "t"), edge("t", "out")},
			want:  map[string]string{"t": afterIn, "out": "runs inline after t: fused into that step, on the worker that runs it"},
		},
		{
			name:  "the pure targets of a fork, its join when every branch is pure and the step after the join run inline",
			nodes: []map[string]any{node("in", "input"), transform("a"), transform("b"), node("j", "join"), node("out", "output")},
			edges: []map[string]any{edge("in", "a"), edge("in", "b"), edge("a", "j"), edge("b", "j"), edge("j", "out")},
			want: map[string]string{"a": afterIn, "b": afterIn,
				"j":   "runs inline after the branches of in in the commit of that step, on the worker that runs it",
				"out": "runs inline after j: fused into that step, on the worker that runs it"},
		},
		{
			name: "the join of a fork with a branch of a step with side effects is read by workers",
			nodes: []map[string]any{node("in", "input"), transform("a"), {"id": "s", "type": "agent", "params": map[string]any{"model": "m", "user": "hi"}},
				node("j", "join"), node("out", "output")},
			edges: []map[string]any{edge("in", "a"), edge("in", "s"), edge("a", "j"), edge("s", "j"), edge("j", "out")},
			want: map[string]string{"a": afterIn,
				"out": "runs inline after j: fused into that step, on the worker that runs it"},
		},
		{
			name: "a route with one edge runs inline after the router; a route with two forks",
			nodes: []map[string]any{node("in", "input"),
				{"id": "route", "type": "router", "params": map[string]any{"routes": map[string]any{"code": ".code", "db": ".db"}}},
				transform("coding"), transform("review"), transform("database"), transform("general"), node("out", "output")},
			edges: []map[string]any{edge("in", "route"),
				{"from": "route", "port": "code", "to": "coding"}, {"from": "route", "port": "code", "to": "review"},
				{"from": "route", "port": "db", "to": "database"}, {"from": "route", "port": "default", "to": "general"},
				edge("database", "out"), edge("general", "out")},
			want: map[string]string{"route": afterIn, "database": afterRoute, "general": afterRoute,
				"out": "runs inline after database, general: fused into that step, on the worker that runs it"},
		},
		{
			name: "the items of a fanout whose branches meet at a join run inline, and so does the join",
			nodes: []map[string]any{node("in", "input"), {"id": "each", "type": "fanout", "params": map[string]any{"items": ".items", "as": "x"}},
				transform("item"), node("merge", "join"), node("out", "output")},
			edges: []map[string]any{edge("in", "each"), edge("each", "item"), edge("item", "merge"), edge("merge", "out")},
			want: map[string]string{"each": afterIn, "item": "runs inline after each for up to 64 item steps a commit (a worker reads the rest): fused into that step, on the worker that runs it",
				"merge": "runs inline after the branches of each in the commit of that step when every item's branch ran there (up to 64 item steps; else a worker reads it)",
				"out":   "runs inline after merge: fused into that step, on the worker that runs it"},
		},
		{
			name: "the items of a fanout whose branches never meet are read by workers",
			nodes: []map[string]any{node("in", "input"), {"id": "each", "type": "fanout", "params": map[string]any{"items": ".items", "as": "x"}},
				transform("item"), node("out", "output")},
			edges: []map[string]any{edge("in", "each"), edge("each", "item"), edge("item", "out")},
			want: map[string]string{"each": afterIn,
				"out": "runs inline after item: fused into that step, on the worker that runs it"},
		},
		{
			name: "a tool runs within its agents' steps, and the pure step after an agent runs inline after it",
			nodes: []map[string]any{node("in", "input"),
				{"id": "agent", "type": "agent", "params": map[string]any{"model": "m", "user": "hi"}},
				{"id": "ctx", "type": "data", "params": map[string]any{"tool_name": "query"}},
				transform("t"), node("out", "output")},
			edges: []map[string]any{edge("in", "agent"), {"from": "ctx", "port": "tool", "to": "agent", "to_port": "tools"}, edge("agent", "t"), edge("t", "out")},
			want: map[string]string{"ctx": "a tool: runs within the steps of agent",
				"t":   "runs inline after agent: fused into that step, on the worker that runs it",
				"out": "runs inline after t: fused into that step, on the worker that runs it"},
		},
		{
			name: "after a step with side effects, a pure step that may not finish in bounded time is read by workers",
			nodes: []map[string]any{node("in", "input"),
				{"id": "agent", "type": "agent", "params": map[string]any{"model": "m", "user": "hi"}},
				{"id": "sum", "type": "transform", "params": map[string]any{"expr": "{n: (.a + 1)}"}}, node("out", "output")},
			edges: []map[string]any{edge("in", "agent"), edge("agent", "sum"), edge("sum", "out")},
			want:  map[string]string{"out": "runs inline after sum: fused into that step, on the worker that runs it"},
		},
		{
			name:  "of edges with conditions, each may be the only one taken",
			nodes: []map[string]any{node("in", "input"), transform("x"), transform("y")},
			edges: []map[string]any{{"from": "in", "to": "x", "condition": ".x"}, {"from": "in", "to": "y", "condition": ".y"}},
			want:  map[string]string{"x": maybeIn, "y": maybeIn},
		},
		{
			name:  "an edge without a condition beside one with a condition runs alone only when the other is not taken",
			nodes: []map[string]any{node("in", "input"), transform("x"), transform("y")},
			edges: []map[string]any{edge("in", "x"), {"from": "in", "to": "y", "condition": ".y"}},
			want:  map[string]string{"x": maybeIn},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, _ := json.Marshal(map[string]any{"sluice": 1, "id": "notes", "nodes": tc.nodes, "edges": tc.edges})
			plan, problems := flows.Compile(doc, nodes.NewRegistry(nil), flows.DefaultLimits)
			if plan == nil {
				t.Fatalf("the flow does not compile: %v", problems)
			}
			got := queueNotes(plan)
			if got == nil {
				got = map[string]string{}
			}
			if !maps.Equal(got, tc.want) {
				for id, note := range got {
					if tc.want[id] != note {
						t.Errorf("%s: %q, want %q", id, note, tc.want[id])
					}
				}
				for id, note := range tc.want {
					if _, ok := got[id]; !ok {
						t.Errorf("%s: no note, want %q", id, note)
					}
				}
			}
		})
	}
}
