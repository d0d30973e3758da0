package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes/nodetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// Two workspaces' flows may each have a run of the same id (a caller chooses it:
// "order-42"), and their checkpoints may have the same id (the time each was written,
// within its own run's stream). The states this process keeps decoded are the flow's
// own: a step of one never starts from the other's state, which another workspace's
// secrets and data are in.
func TestRunsOfOneIdInTwoWorkspacesNeverShareACachedState(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		e := New(r, nodetest.Registry(r.Client), Options{})
		base := storetest.FlowID(t)
		plan := func(ws string) *flows.Plan {
			id := ws + "." + base
			storetest.DeleteFlowKeys(t, r, id)
			p, probs, err := e.Compile([]byte(`{"sluice": 1, "id": "` + id + `", "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output", "params": {"value": "."}}],
				"edges": [{"from": "in", "to": "out"}]}`))
			if err != nil {
				t.Fatalf("compile: %v %v", err, probs)
			}
			if err := e.Publish(ctx, p); err != nil {
				t.Fatal(err)
			}
			return p
		}
		a, b := plan("acme"), plan("beta")
		const run = "order-42"
		// Beta's run first, then acme's: acme's first checkpoint is the newer.
		if _, err := e.Start(ctx, b, json.RawMessage(`{"who": "beta"}`), StartOptions{RunID: run}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Start(ctx, a, json.RawMessage(`{"who": "acme", "card": "4111 acme's"}`), StartOptions{RunID: run}); err != nil {
			t.Fatal(err)
		}
		first := func(p *flows.Plan) (store.RunRef, string) {
			ref, err := r.FindRun(ctx, p.Flow, run)
			if err != nil {
				t.Fatal(err)
			}
			cps, err := r.Checkpoints(ctx, ref, "-", 0)
			if err != nil || len(cps) == 0 {
				t.Fatalf("checkpoints of %s/%s: %v %v", p.Flow, run, cps, err)
			}
			return ref, cps[0].ID
		}
		refA, ckA := first(a)
		refB, ckB := first(b)
		if ckA != ckB {
			// Both were written in different milliseconds: give beta's run a checkpoint
			// of acme's id too, the same state as its first.
			sk := store.PartKeys(b.Flow, refB.Part).State(run)
			st, err := r.Client.HGet(ctx, sk, ckB).Result()
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Client.HSet(ctx, sk, ckA, st).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			ref        store.RunRef
			own, other string
		}{{refA, "acme", "beta"}, {refB, "beta", "acme"}} {
			got, err := e.stateAt(ctx, c.ref, ckA)
			if err != nil {
				t.Fatal(err)
			}
			if js, _ := json.Marshal(got); strings.Contains(string(js), c.other) || !strings.Contains(string(js), c.own) {
				t.Errorf("%s's run at checkpoint %s starts from %s, want %s's own state", c.own, ckA, js, c.own)
			}
		}
	})
}
