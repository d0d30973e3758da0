package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestARunWaitsForAWorkerAtANodeNobodyReads(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		k := store.FlowKeys(flow)
		if err := r.Client.SAdd(ctx, k.Nodes(), "in", "out").Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.EnsureGroups(ctx, flow, []string{"in", "out"}); err != nil {
			t.Fatal(err)
		}
		created := time.Now().Add(-time.Minute)
		// An activation of run-a at "in", added a while ago, that nobody has read.
		add := func(node, run string, at time.Time) {
			t.Helper()
			id := fmt.Sprintf("%d-0", at.UnixMilli())
			if err := r.Client.Do(ctx, "XADD", k.In(node), id, "run", run, "ckpt", "0-1").Err(); err != nil {
				t.Fatal(err)
			}
		}
		add("in", "run-a", time.Now().Add(-10*time.Second))
		// run-b's activation at "out" was added this instant: a live worker blocked on the
		// stream has not had the moment to read it.
		add("out", "run-b", time.Now().Add(time.Hour))

		got, err := r.WaitingForWorker(ctx, store.RunRef{Flow: flow, Run: "run-a"}, created)
		if err != nil || len(got) != 1 || got[0] != "in" {
			t.Fatalf("run-a waits for a worker at %v (%v), want [in]", got, err)
		}
		if got, _ := r.WaitingForWorker(ctx, store.RunRef{Flow: flow, Run: "run-b"}, created); len(got) != 0 {
			t.Errorf("run-b, just queued, waits for a worker at %v, want nowhere yet", got)
		}
		if got, _ := r.WaitingForWorker(ctx, store.RunRef{Flow: flow, Run: "run-c"}, created); len(got) != 0 {
			t.Errorf("run-c, which has no activation, waits at %v", got)
		}

		// A worker reads "in": nothing waits for one any more.
		if err := r.Client.XGroupCreateConsumer(ctx, k.In("in"), store.Group, "host-1-1").Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := r.WaitingForWorker(ctx, store.RunRef{Flow: flow, Run: "run-a"}, created); err != nil || len(got) != 0 {
			t.Errorf("with a consumer on in, run-a waits at %v (%v)", got, err)
		}
	})
}

// A worker that crashed leaves its consumer in the group (pruned only an hour later),
// but its liveness record stops moving: after LiveConsumerWindow the node counts as
// unserved again, on any Redis version, and the run says it waits for a worker.
func TestARunWhoseOnlyWorkerWentSilentWaitsForAWorker(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		k := store.FlowKeys(flow)
		if err := r.Client.SAdd(ctx, k.Nodes(), "in").Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.EnsureGroups(ctx, flow, []string{"in"}); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-10 * time.Second)
		if err := r.Client.Do(ctx, "XADD", k.In("in"), fmt.Sprintf("%d-0", at.UnixMilli()), "run", "run-a", "ckpt", "0-1").Err(); err != nil {
			t.Fatal(err)
		}
		// The worker's consumer exists and Redis saw it a moment ago (it was just
		// created), but the worker last said it was alive longer ago than the window.
		consumer := "crashed-" + flow
		t.Cleanup(func() { r.ForgetWorkers(context.Background(), []string{consumer}) })
		if err := r.Client.XGroupCreateConsumer(ctx, k.In("in"), store.Group, consumer).Err(); err != nil {
			t.Fatal(err)
		}
		// The liveness set is shared: a sweeper of another package's tests may forget
		// the silent record at any moment. Check again until the record outlived a check.
		silent := float64(time.Now().Add(-store.LiveConsumerWindow - 5*time.Second).UnixMilli())
		ref := store.RunRef{Flow: flow, Run: "run-a"}
		var got []string
		var err error
		for try := 0; ; try++ {
			if err := r.Client.ZAdd(ctx, "sluice:workers", redis.Z{Score: silent, Member: consumer}).Err(); err != nil {
				t.Fatal(err)
			}
			got, err = r.WaitingForWorker(ctx, ref, time.Now().Add(-time.Minute))
			if score, zerr := r.Client.ZScore(ctx, "sluice:workers", consumer).Result(); (zerr == nil && score == silent) || try == 20 {
				break
			}
		}
		if err != nil || len(got) != 1 || got[0] != "in" {
			t.Fatalf("with its only worker silent for over %s, run-a waits for a worker at %v (%v), want [in]", store.LiveConsumerWindow, got, err)
		}

		// The same worker says it is alive again: the node is served.
		if err := r.WorkerAlive(ctx, consumer); err != nil {
			t.Fatal(err)
		}
		if got, err := r.WaitingForWorker(ctx, ref, time.Now().Add(-time.Minute)); err != nil || len(got) != 0 {
			t.Errorf("with its worker alive, run-a waits for a worker at %v (%v), want nowhere", got, err)
		}
	})
}
