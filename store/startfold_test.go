package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A run started by the commit of its first steps reads as any run: its version, input,
// creation time, status and steps, its partition's runs list, a history that begins with
// its input checkpoint, and its input kept once. The same start sent again (its reply
// lost, or its call refused and its commits sent again one by one) writes nothing: it
// answers "dropped" with the run's status.
func TestARunStartedByItsCommitReadsAsAnyRunAndStartsOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		if err := r.StoreVersion(ctx, flow, "v1", []byte("{}"), []string{"in", "n1", "n2", "n3", "out"}); err != nil {
			t.Fatal(err)
		}
		state := []byte(`{"pad":"` + strings.Repeat("x", 40) + `"}`)
		const run = "r0123456789abcdefghijk"
		c := foldedStart(flow, run, state)
		c.Start.Fields = append(c.Start.Fields, "trigger", "api")
		res, errs := r.CommitBatch(ctx, []*store.Commit{c})
		if errs[0] != nil || res[0].Status != store.CommitOK || res[0].RunStatus != store.StatusSucceeded || res[0].Step != 5 {
			t.Fatalf("commit: %v %+v", errs[0], res[0])
		}
		got, err := r.GetRun(ctx, flow, run)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != store.StatusSucceeded || got.Version != "v1" || got.Steps != 5 || got.Live != 0 ||
			string(got.Input) != string(state) || got.Created.IsZero() || got.Started == nil || got.Finished == nil || got.Trigger != "api" {
			t.Errorf("the run reads %+v", got)
		}
		if n, err := r.CountRuns(ctx, flow, time.Time{}, time.Time{}); err != nil || n != 1 {
			t.Errorf("the flow counts %d runs (%v), want this one", n, err)
		}
		cps, err := r.Checkpoints(ctx, got.Ref(), "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var nodes []string
		for _, cp := range cps {
			nodes = append(nodes, cp.Kind+":"+cp.Node)
		}
		if strings.Join(nodes, " ") != "input: step:in step:n1 step:n2 step:n3 step:out" || cps[0].ID != c.Start.Ckpt ||
			string(cps[0].Update) != string(state) || cps[1].Parent != c.Start.Ckpt {
			t.Errorf("history %v (first %s, update %s; in's parent %s), want the input checkpoint %s, then the five steps",
				nodes, cps[0].ID, cps[0].Update, cps[1].Parent, c.Start.Ckpt)
		}

		again, errs := r.CommitBatch(ctx, []*store.Commit{c})
		if errs[0] != nil || again[0].Status != store.CommitDropped || again[0].RunStatus != store.StatusSucceeded {
			t.Fatalf("the start sent again: %v %+v, want dropped, succeeded", errs[0], again[0])
		}
		if cps2, _ := r.Checkpoints(ctx, got.Ref(), "", 0); len(cps2) != len(cps) {
			t.Errorf("the start sent again left %d checkpoints, want %d", len(cps2), len(cps))
		}
	})
}
