package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// A bulk replay of failed runs onto the fixed version, stopped partway (its process
// stopping) and taken over: every run is accounted for once in the report, none is
// replayed twice.
func TestBulkReplayStoppedAndTakenOverReplaysEveryRunOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		v := newEnv(t, r)
		ctx := context.Background()
		broken := v.compile(discountFlow(`{tier: "small", discount: (.customer | tonumber)}`))
		v.work(broken)
		n := 24
		for i := 0; i < n; i++ {
			mustStatus(t, v.run(broken, fmt.Sprintf(`{"customer":"c%d","amount":%d}`, i, 10*i)), store.StatusFailed)
		}
		ok := v.run(broken, `{"customer":"7","amount":1}`) // succeeded: not chosen
		mustStatus(t, ok, store.StatusSucceeded)
		fixed := v.version(broken, discountFlow(`{tier: "small", discount: (.amount / 10)}`))

		q := engine.BulkQuery{Status: store.StatusFailed, Node: "price", Error: "TONUMBER", Since: time.Now().Add(-time.Hour)}
		est, _, err := v.e.EstimateBulk(ctx, broken.Flow, q)
		if err != nil || est.Runs != n {
			t.Fatalf("estimate = %+v, %v; want %d runs", est, err, n)
		}
		job, _, err := v.e.CreateBulk(ctx, broken.Flow, engine.BulkSpec{Query: q, Rate: 1000, Concurrency: 4}, fixed)
		if err != nil {
			t.Fatal(err)
		}

		// The first process stops after a few runs.
		first, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { _, err := v.e.RunBulk(first, broken.Flow, job); done <- err }()
		for {
			rep, err := v.e.BulkReport(ctx, broken.Flow, job)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Results) >= 5 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		stop()
		<-done
		mid, _ := v.e.BulkReport(ctx, broken.Flow, job)
		if mid.Status != store.JobRunning || len(mid.Results) == n {
			t.Fatalf("after the stop: %s with %d results; want it running and unfinished", mid.Status, len(mid.Results))
		}

		// Another takes it over and finishes it.
		took, err := v.e.RunBulk(ctx, broken.Flow, job)
		if err != nil || !took {
			t.Fatalf("take over: %v, %v", took, err)
		}
		rep, err := v.e.BulkReport(ctx, broken.Flow, job)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Status != store.JobDone || rep.Total != n || rep.Done != n || rep.Failed != 0 || rep.Skipped != 0 || len(rep.Results) != n {
			t.Fatalf("report: %s total %d done %d failed %d skipped %d results %d; want all %d done", rep.Status, rep.Total, rep.Done, rep.Failed, rep.Skipped, len(rep.Results), n)
		}
		seen := map[string]bool{}
		for _, res := range rep.Results {
			if seen[res.Run] || seen[res.Replay] {
				t.Errorf("run %s or its replay %s twice in the report", res.Run, res.Replay)
			}
			seen[res.Run], seen[res.Replay] = true, true
			if res.Summary != "1 same, 1 fixed, 1 new" || res.Status != store.StatusSucceeded {
				t.Errorf("result %+v, want the replay succeeded: 1 same, 1 fixed, 1 new", res)
			}
			o, err := v.e.Get(ctx, broken.Flow, res.Run)
			if err != nil || len(o.ReplayedAs) != 1 || o.ReplayedAs[0] != res.Replay {
				t.Errorf("original %s replayed as %v (%v), want once, as %s", res.Run, o.ReplayedAs, err, res.Replay)
			}
		}

		// A job cancelled is not worked on.
		job2, _, err := v.e.CreateBulk(ctx, broken.Flow, engine.BulkSpec{Query: q}, fixed)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.e.CancelBulk(ctx, broken.Flow, job2); err != nil {
			t.Fatal(err)
		}
		if took, err := v.e.RunBulk(ctx, broken.Flow, job2); took || err != nil {
			t.Errorf("a cancelled job was taken (%v, %v)", took, err)
		}
		if err := v.e.CancelBulk(ctx, broken.Flow, job2); err == nil {
			t.Error("cancelling a cancelled job again did not say so")
		}
	})
}
