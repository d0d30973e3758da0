package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/store"
)

// The fork and join semantics, as a table: what a finished step does to its run for a
// given plan, node, fork tokens and result. No Redis.
func TestTransitions(t *testing.T) {
	// in → a → {b, c} → j → out, where c may fork again into d and e (towards j too);
	// f fans out over items into g, whose branches meet at k; h ends a branch elsewhere.
	doc := `{"sluice": 1, "id": "tt",
	 "nodes": [{"id": "in", "type": "input"}, {"id": "a", "type": "transform", "params": {"expr": "{}"}},
	  {"id": "b", "type": "transform", "params": {"expr": "{}"}}, {"id": "c", "type": "transform", "params": {"expr": "{}"}},
	  {"id": "d", "type": "transform", "params": {"expr": "{}"}}, {"id": "e", "type": "transform", "params": {"expr": "{}"}},
	  {"id": "j", "type": "join"}, {"id": "out", "type": "output"},
	  {"id": "f", "type": "fanout", "params": {"items": ".xs"}}, {"id": "g", "type": "transform", "params": {"expr": "{}"}},
	  {"id": "k", "type": "join"}, {"id": "h", "type": "approval", "params": {"prompt": "ok?"}}],
	 "edges": [{"from": "in", "to": "a"}, {"from": "a", "to": "b"}, {"from": "a", "to": "c"},
	  {"from": "b", "to": "j"}, {"from": "c", "to": "d", "condition": ".split"}, {"from": "c", "to": "e", "condition": ".split"},
	  {"from": "c", "to": "j", "condition": ".split | not"}, {"from": "d", "to": "j"}, {"from": "e", "to": "j"},
	  {"from": "j", "to": "f"}, {"from": "f", "to": "g"}, {"from": "g", "to": "k"}, {"from": "k", "to": "h"}, {"from": "h", "port": "approved", "to": "out"}]}`
	plan, probs := flows.Compile([]byte(doc), nodes.NewRegistry(nil), flows.DefaultLimits)
	if plan == nil {
		t.Fatalf("compile: %v", probs)
	}
	fork := tokens{{frame: "a~E1", branch: "1"}}
	for _, tc := range []struct {
		name  string
		node  string
		at    stepPlace
		res   *flows.Result
		state map[string]any
		want  string
	}{
		{name: "a single successor is activated with the same tokens", node: "in",
			res: &flows.Result{}, want: "activate a from 0 tok \"\""},
		{name: "a step with two successors opens a fork that meets at their join", node: "a", at: stepPlace{Entry: "E1"},
			res: &flows.Result{}, want: `open a~E1 n=2 outer "" base 0 join j | activate b from 0 tok "a~E1@0" | activate c from 0 tok "a~E1@1"`},
		{name: "a branch that reaches its join arrives", node: "b", at: stepPlace{Tokens: tokens{{frame: "a~E1", branch: "0"}}},
			res: &flows.Result{}, want: "arrive a~E1 branch 0 from 0 join j"},
		{name: "a branch that forks again towards the same join splits its branch", node: "c", at: stepPlace{Tokens: fork},
			res: &flows.Result{}, state: map[string]any{"split": true},
			want: `split a~E1 +1 | activate d from 0 tok "a~E1@1.0" | activate e from 0 tok "a~E1@1.1"`},
		{name: "a branch whose conditions take it nowhere gives its token back", node: "c", at: stepPlace{Tokens: fork},
			res: &flows.Result{Ports: []string{"none"}}, want: "giveback a~E1 join j"},
		{name: "a join's step closes its fork first", node: "j", at: stepPlace{Join: "a~E1"},
			res: &flows.Result{}, want: `close a~E1 | activate f from 0 tok ""`},
		{name: "a fanout seeds a checkpoint per item and forks over them", node: "f", at: stepPlace{Entry: "E2"},
			res:  &flows.Result{Items: []any{map[string]any{"x": 1}, map[string]any{"x": 2}}},
			want: `seed {"x":1} | seed {"x":2} | open f~E2 n=2 outer "" base 0 join k | activate g from 1 tok "f~E2@0" | activate g from 2 tok "f~E2@1"`},
		{name: "a fanout over no items opens an empty fork, which fires its join", node: "f", at: stepPlace{Entry: "E3"},
			res: &flows.Result{Items: []any{}}, want: `open f~E3 n=0 outer "" base 0 join k`},
		{name: "an approval that waits parks the run and routes nowhere", node: "h", at: stepPlace{Depth: 7},
			res: &flows.Result{Wait: &flows.Wait{Prompt: "ok?"}}, want: "park until 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := plan.Nodes[tc.node]
			state := tc.state
			if state == nil {
				state = map[string]any{}
			}
			var succ []string
			if tc.res.Wait == nil {
				var err error
				if succ, err = successors(context.Background(), node, tc.res.Ports, state); err != nil {
					t.Fatal(err)
				}
			}
			trans, err := transitions(plan, node, tc.at, tc.res, state, succ, time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(trans))
			for i, tr := range trans {
				got[i] = store.Describe(tr)
			}
			if strings.Join(got, " | ") != tc.want {
				t.Errorf("got  %s\nwant %s", strings.Join(got, " | "), tc.want)
			}
		})
	}
}

// A fanout item that is not an object cannot seed its branch: the step fails for good.
func TestTransitionsRefuseAFanoutItemThatIsNotAnObject(t *testing.T) {
	doc := `{"sluice": 1, "id": "tt", "nodes": [{"id": "in", "type": "input"}, {"id": "f", "type": "fanout"},
	 {"id": "g", "type": "transform", "params": {"expr": "{}"}}, {"id": "k", "type": "join"}],
	 "edges": [{"from": "in", "to": "f"}, {"from": "f", "to": "g"}, {"from": "g", "to": "k"}]}`
	plan, probs := flows.Compile([]byte(doc), nodes.NewRegistry(nil), flows.DefaultLimits)
	if plan == nil {
		t.Fatalf("compile: %v", probs)
	}
	_, err := transitions(plan, plan.Nodes["f"], stepPlace{Entry: "E"}, &flows.Result{Items: []any{map[string]any{}, 3}}, map[string]any{}, []string{"g"}, time.Now())
	if !flows.IsPermanent(err) || !strings.Contains(err.Error(), "items[1]") {
		t.Errorf("got %v, want a permanent error naming items[1]", err)
	}
}
