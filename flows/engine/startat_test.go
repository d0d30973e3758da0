package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A run started at a node with a recorded state runs that node and what follows, not
// what comes before it (a test case of one node pays for nothing before it); the
// input node's check does not apply to the state. A node the flow lacks or a state
// that is not an object is refused, saying where.
func TestRunStartsAtANodeWithAState(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		p := v.example("linear")
		v.work(p)
		ctx := context.Background()
		id, err := v.e.Start(ctx, p, json.RawMessage(`{"greeting": "Hello, Grace!"}`), engine.StartOptions{At: "shout"})
		if err != nil {
			t.Fatal(err)
		}
		run := v.wait(p, id)
		mustStatus(t, run, store.StatusSucceeded)
		if got := output(t, run); got["greeting"] != "HELLO, GRACE!" {
			t.Errorf("output %v, want the shout of the recorded greeting", got)
		}
		ran := map[string]bool{}
		cps, _ := v.e.Checkpoints(ctx, p.Flow, id)
		for _, c := range cps {
			ran[c.Node] = true
		}
		if ran["greet"] || ran["in"] || !ran["shout"] || !ran["out"] {
			t.Errorf("nodes that ran: %v; want shout and out only", ran)
		}
		for _, tc := range []struct{ at, state, path string }{
			{"nope", `{}`, "start.node"},
			{"shout", `[1]`, "start.state"},
		} {
			_, err := v.e.Start(ctx, p, json.RawMessage(tc.state), engine.StartOptions{At: tc.at})
			var fe *flows.Error
			if flows.ErrorCode(err) != flows.Invalid || !errors.As(err, &fe) || fe.Path != tc.path {
				t.Errorf("start at %q with %s: %v, want Invalid at %s", tc.at, tc.state, err, tc.path)
			}
		}
	})
}
