package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestHeartbeatKeepsAStepsDeliveryCount(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		if err := r.StoreVersion(ctx, flow, "v1", []byte("{}"), []string{"a"}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.StartRun(ctx, store.StartArgs{Flow: flow, Run: "r1", Version: "v1", State: []byte("{}"),
			Checkpoint: store.Checkpoint{Kind: "input"}, Entries: []string{"a"}}); err != nil {
			t.Fatal(err)
		}
		acts, err := r.ReadNodes(ctx, "w-1", []store.NodeRef{{Flow: flow, Node: "a"}}, 1, 0)
		if err != nil || len(acts) != 1 {
			t.Fatalf("read: %v %v", acts, err)
		}
		for i := 0; i < 5; i++ {
			if err := r.Heartbeat(ctx, store.NodeRef{Flow: flow, Node: "a"}, "w-1", []string{acts[0].ID}); err != nil {
				t.Fatal(err)
			}
		}
		// Someone else's heartbeat leaves the entry alone.
		if err := r.Heartbeat(ctx, store.NodeRef{Flow: flow, Node: "a"}, "w-2", []string{acts[0].ID}); err != nil {
			t.Fatal(err)
		}
		p, err := r.Client.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: store.FlowKeys(flow).In("a"), Group: store.Group, Start: "-", End: "+", Count: 10}).Result()
		if err != nil || len(p) != 1 {
			t.Fatalf("pending: %v %v", p, err)
		}
		if p[0].RetryCount != 1 || p[0].Consumer != "w-1" {
			t.Errorf("after heartbeats: delivered %d times to %s, want once to w-1", p[0].RetryCount, p[0].Consumer)
		}
	})
}

func TestPruneConsumersDeletesOnlyIdleOnesWithNothingPending(t *testing.T) {
	r := storetest.Real(t) // the embedded Redis does not report idle times
	ctx := context.Background()
	flow := storetest.FlowID(t)
	storetest.DeleteFlowKeys(t, r, flow)
	if err := r.StoreVersion(ctx, flow, "v1", []byte("{}"), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"r1", "r2", "r3"} {
		if _, err := r.StartRun(ctx, store.StartArgs{Flow: flow, Run: run, Version: "v1", State: []byte("{}"),
			Checkpoint: store.Checkpoint{Kind: "input"}, Entries: []string{"a"}}); err != nil {
			t.Fatal(err)
		}
	}
	// gone-1 still holds its entry; gone-2 finished its own; live reads now.
	r.ReadNodes(ctx, "gone-1", []store.NodeRef{{Flow: flow, Node: "a"}}, 1, 10*time.Millisecond)
	acts, _ := r.ReadNodes(ctx, "gone-2", []store.NodeRef{{Flow: flow, Node: "a"}}, 1, 10*time.Millisecond)
	if len(acts) != 1 {
		t.Fatalf("gone-2 read %d entries", len(acts))
	}
	r.Client.XAck(ctx, store.FlowKeys(flow).In("a"), store.Group, acts[0].ID)
	time.Sleep(30 * time.Millisecond)
	r.ReadNodes(ctx, "live", []store.NodeRef{{Flow: flow, Node: "a"}}, 1, 10*time.Millisecond)
	n, err := r.PruneConsumers(ctx, flow, []string{"a"}, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := r.Client.XInfoConsumers(ctx, store.FlowKeys(flow).In("a"), store.Group).Result()
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	if n != 1 || len(names) != 2 {
		t.Errorf("pruned %d, left %v; want gone-2 deleted, gone-1 (pending) and live kept", n, names)
	}
}

func TestDiscardingADeadLetterOfAnExpiredRunLeavesNoStrayKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		k := store.FlowKeys(flow)
		id, err := r.Client.XAdd(ctx, &redis.XAddArgs{Stream: k.Dead(), Values: []any{"node", "a", "run", "gone", "error", "boom"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.DiscardDead(ctx, flow, id); err != nil {
			t.Fatal(err)
		}
		if n, _ := r.Client.XLen(ctx, k.Dead()).Result(); n != 0 {
			t.Errorf("%d dead letters left, want 0", n)
		}
		if n, _ := r.Client.Exists(ctx, k.Run("gone")).Result(); n != 0 {
			t.Error("discarding created a hash for the expired run")
		}
		if err := r.DiscardDead(ctx, flow, id); flows.ErrorCode(err) != flows.NotFound {
			t.Errorf("discarding twice: %v, want not found", err)
		}
	})
}
