package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// Starts sent together are each what StartRun makes of them: fresh ones on several
// partitions (several slots of a cluster) in one round trip, one with its first
// checkpoint's id chosen, one whose version is not stored (created, and said so), and
// one with a chosen run id (start.lua, on its own).
func TestStartRunsCreatesEachRunAsStartRunWould(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow, other := storetest.FlowID(t), storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		storetest.DeleteFlowKeys(t, r, other)
		for _, f := range []string{flow, other} {
			if err := r.UsePartitions(ctx, f, 3, []string{"a"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.StoreVersion(ctx, flow, "v1", []byte("{}"), []string{"a"}); err != nil {
			t.Fatal(err)
		}
		// Runs live on the partition their id hashes to (store.PartOf).
		arg := func(f, run string, fresh bool) store.StartArgs {
			in := fmt.Sprintf(`{"run":%q}`, run)
			return store.StartArgs{Flow: f, Run: run, Part: store.PartOf(run, 3), Version: "v1", State: []byte(in), Fresh: fresh,
				Checkpoint: store.Checkpoint{Kind: "input", Update: []byte(in)}, Entries: []string{"a"}, Fields: []string{"input", in}}
		}
		as := []store.StartArgs{arg(flow, "r0", true), arg(flow, "r1", true), arg(flow, "r2", true), arg(flow, "r3", true),
			arg(flow, "chosen", false), arg(other, "lost", true), arg(flow, "mine", true)}
		parts := map[int]bool{}
		for _, a := range as {
			parts[a.Part] = true
		}
		if len(parts) < 2 {
			t.Fatalf("the runs are all on one partition: choose other ids")
		}
		as[6].Ckpt = store.FirstCkptID()
		ckpts, errs := r.StartRuns(ctx, as)
		for i, a := range as {
			switch {
			case a.Flow == other:
				if flows.ErrorCode(errs[i]) != flows.NotFound {
					t.Errorf("%s: error %v, want NotFound: its version is not stored", a.Run, errs[i])
				}
			case errs[i] != nil:
				t.Errorf("%s: %v", a.Run, errs[i])
			}
			if a.Ckpt != "" && ckpts[i] != a.Ckpt {
				t.Errorf("%s: first checkpoint %q, want the chosen %q", a.Run, ckpts[i], a.Ckpt)
			}
			run, err := r.GetRun(ctx, a.Flow, a.Run)
			if err != nil {
				t.Errorf("%s: %v", a.Run, err)
				continue
			}
			if run.Status != store.StatusQueued || run.Part != a.Part || run.LastCkpt != ckpts[i] || string(run.Input) != string(a.State) {
				t.Errorf("%s: run %+v, want queued on partition %d with first checkpoint %s and its input", a.Run, run, a.Part, ckpts[i])
			}
			state, err := r.LoadState(ctx, run.Ref(), ckpts[i])
			if err != nil || string(state) != string(a.State) {
				t.Errorf("%s: state %s %v, want %s", a.Run, state, err, a.State)
			}
			acts, err := r.Client.XRange(ctx, store.PartKeys(a.Flow, a.Part).In("a"), "-", "+").Result()
			found := false
			for _, m := range acts {
				if m.Values["run"] == a.Run && m.Values["ckpt"] == ckpts[i] {
					found = true
				}
			}
			if err != nil || !found {
				t.Errorf("%s: no first activation on node a of partition %d (%v)", a.Run, a.Part, err)
			}
			if _, err := r.Client.ZScore(ctx, store.PartKeys(a.Flow, a.Part).Runs(), a.Run).Result(); err != nil {
				t.Errorf("%s: not in its partition's runs: %v", a.Run, err)
			}
		}
		// Every run has its one "queued" event, whether its partition's starts shared an
		// events entry or not.
		var prs []store.PartRef
		var after []string
		for p := range parts {
			for _, f := range []string{flow, other} {
				prs, after = append(prs, store.PartRef{Flow: f, Part: p}), append(after, "0-0")
			}
		}
		evs, err := r.ReadRunsEvents(ctx, prs, after, 1000, -1)
		if err != nil {
			t.Fatal(err)
		}
		queued := map[string]int{}
		for _, ev := range evs {
			if ev.Type == "run" && string(ev.Data) == `{"status":"queued"}` {
				queued[ev.Flow+"/"+ev.Run]++
			}
		}
		for _, a := range as {
			if queued[a.Flow+"/"+a.Run] != 1 {
				t.Errorf("%s: %d queued events, want 1 (events %+v)", a.Run, queued[a.Flow+"/"+a.Run], evs)
			}
		}
	})
}
